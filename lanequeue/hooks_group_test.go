package lanequeue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A wait reported to OnSlowWait names the fair-share group the call waited
// in (issue 26: an exporter shows a small tenant's waits apart from a big
// one's): on a fair lane the call's semaphore.Group, else its key's
// tenant; on a global lane made WithFairShare the call's Group; on a keyed
// lane none.
func TestSlowWaitEventNamesTheGroup(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	tenant := func(key string) string { return key[:strings.IndexByte(key, '/')] }
	must(t, addKeyed(q, "session"))
	must(t, addFair(q, "fair", 1, tenant))
	must(t, addGlobal(q, "shared", 1, semaphore.WithFairShare(nil)))
	var got events
	q.SetHooks(lanequeue.Hooks[string]{OnSlowWait: got.on("slow-wait")})
	ctx := context.Background()

	for _, c := range []struct {
		lane, key string
		opts      []semaphore.AcquireOption
		want      string
	}{
		{"fair", "small/1", nil, "small"},
		{"fair", "small/2", []semaphore.AcquireOption{semaphore.Group("cron")}, "cron"},
		{"shared", "big/1", []semaphore.AcquireOption{semaphore.Group("big")}, "big"},
		{"shared", "big/2", nil, ""},
		{"session", "small/1", []semaphore.AcquireOption{semaphore.Group("small")}, ""},
	} {
		holder, err := acquireAll(q, ctx, c.key, []string{c.lane})
		must(t, err)
		waiter := acquireAsync(ctx, q, c.key, []string{c.lane}, c.opts...)
		testkit.Eventually(t, "a waiter", func() bool { return lineLen(q, c.lane, c.key) == 1 })
		holder.Release()
		r := receive(t, waiter)
		must(t, r.err)
		r.t.Release()
		ev := got.take()
		if len(ev) != 1 || ev[0].Lane != c.lane || ev[0].Key != c.key || ev[0].Group != c.want {
			t.Errorf("%s's wait for %s with %d options: events %+v; want one naming group %q", c.key, c.lane, len(c.opts), ev, c.want)
		}
	}
}
