package redislane_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
)

// The heap of deadlines stays a heap, with the timer never set later than
// its earliest deadline, through any order of grants (deadlines in any
// order: a slow reply grants with an earlier send time than a quick one
// after it) and releases.
func TestExpiryHeapKeepsTheEarliestAtItsRoot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := redislane.NewExpiryHeap()
		base := time.Now().Add(time.Hour) // no deadline passes during the test
		live := map[int]time.Time{}
		defer func() {
			for i := range live {
				h.Remove(i)
			}
			h.Stop()
		}()
		for range rapid.IntRange(1, 200).Draw(rt, "steps") {
			if len(live) == 0 || rapid.Bool().Draw(rt, "add") {
				dl := base.Add(time.Duration(rapid.IntRange(0, 50).Draw(rt, "ms")) * time.Millisecond)
				live[h.Add(dl)] = dl
			} else {
				ids := make([]int, 0, len(live))
				for i := range live {
					ids = append(ids, i)
				}
				i := ids[rapid.IntRange(0, len(ids)-1).Draw(rt, "which")%len(ids)]
				h.Remove(i)
				delete(live, i)
			}
			if err := h.Check(); err != nil {
				rt.Fatal(err)
			}
			root := h.Root()
			if len(live) == 0 {
				if root != -1 {
					rt.Fatalf("empty, yet permit %d at the root", root)
				}
				continue
			}
			for i, dl := range live {
				if dl.Before(live[root]) {
					rt.Fatalf("permit %d (%v) is earlier than the root, permit %d (%v)", i, dl, root, live[root])
				}
			}
		}
	})
}

// A permit granted after another but with an earlier deadline (its call
// was sent first and answered last) ends at its own deadline, not at the
// later one the timer was set for.
func TestExpiryEarlierDeadlineAddedLaterEndsFirst(t *testing.T) {
	h := redislane.NewExpiryHeap()
	defer h.Stop()
	late := h.Add(time.Now().Add(time.Hour))
	defer h.Remove(late)
	early := h.Add(time.Now().Add(20 * time.Millisecond))
	ctx := h.Permit(early).Context()
	testkit.Within(t, testkit.Deadline, "the lease with the earlier deadline to end (the timer was left at the later one)", ctx.Done())
	assert.ErrorIs(t, context.Cause(ctx), redislane.ErrLeaseExpired)
	assert.EqualValues(t, 1, h.Expired())
	require.NoError(t, h.Check())
	assert.Equal(t, late, h.Root(), "the later permit is still out")
	assert.NoError(t, h.Permit(late).Context().Err())
}

// A refresh moves a deadline and leaves the heap alone: the timer fires
// at the old deadline, and the permit goes back into the heap at its new
// one, where it ends if no refresh moves it again.
func TestExpiryRefreshedPermitEndsAtItsNewDeadline(t *testing.T) {
	h := redislane.NewExpiryHeap()
	defer h.Stop()
	now := time.Now()
	i := h.AddRefreshed(now.Add(10*time.Millisecond), now.Add(60*time.Millisecond))
	ctx := h.Permit(i).Context()
	testkit.Within(t, testkit.Deadline, "the refreshed lease to end at its new deadline", ctx.Done())
	assert.False(t, time.Now().Before(h.Permit(i).Deadline()), "the lease ended before its new deadline")
	assert.EqualValues(t, 1, h.Expired())
	require.NoError(t, h.Check())
	assert.Equal(t, -1, h.Root())
}
