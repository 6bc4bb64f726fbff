package scenario

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// Fair returns the recipe's inbound lanes (examples/chatgateway): a keyed
// lane "thread" and a global lane "agents" of capacity 1, users before
// cron jobs and tenants sharing equally (semaphore.WithPriorities and
// WithFairShare), each call naming its tenant with semaphore.Group; the
// queue's hooks record into w (exporters.GroupHooks). Before it returns, a
// first call holds agents while one call per element of tenants, each on
// a thread of its own, joins agents' line, in that order; then the first
// releases, and each waiter releases as soon as it is granted. So every
// waiter is a wait of its tenant's group, granted, and agents' Waited is
// len(tenants). It returns the queue, closed at the test's end.
func Fair(t testing.TB, w *exporters.GroupWaits, tenants ...string) *lanequeue.Queue[string] {
	t.Helper()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, q.Add("thread", lanequeue.NewKeyedLane(keyedsem.New[string]())))
	must(t, q.Add("agents", lanequeue.NewGlobalLane[string](semaphore.New(1,
		semaphore.WithPriorities(time.Second), semaphore.WithFairShare(nil)))))
	q.SetHooks(exporters.GroupHooks(w, lanequeue.Hooks[string]{}))
	inbound, err := q.Lanes("thread", "agents")
	must(t, err)
	ctx := context.Background()
	first, err := q.AcquireAll(ctx, "first/0", inbound, semaphore.Group("first"))
	must(t, err)
	done := make([]<-chan error, len(tenants))
	for i, tenant := range tenants {
		thread := tenant + "/" + strconv.Itoa(i)
		done[i] = testkit.Go(func() error {
			tk, err := q.AcquireAll(ctx, thread, inbound, semaphore.Priority(1), semaphore.Group(tenant))
			if err == nil {
				tk.Release()
			}
			return err
		})
		testkit.Eventually(t, thread+" in agents' line", func() bool { return Lane(q, "agents").Waiters == i+1 })
	}
	first.Release()
	for i, ch := range done {
		must(t, testkit.Recv(t, ch, "waiter "+strconv.Itoa(i)))
	}
	return q
}
