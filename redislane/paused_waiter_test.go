//go:build unix

package redislane_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// Scenario 8a: a waiter process (not a holder) is stopped with SIGSTOP
// while queued, for longer than its lease. Either the unit is handed to it
// while it is stopped, and that grant expires unused, or its queue entry
// expires first and the unit goes past it: in both cases another instance
// gets the unit within a lease, and when the stopped waiter continues it
// does not take the unit while the other holds it (the hand-over message
// waiting in its socket is stale); it gets a permit only after the other's
// release, with a higher fencing token.
func TestPausedWaiterNeverHoldsAfterItsLease(t *testing.T) {
	for _, tc := range []struct {
		name        string
		afterExpiry bool // release once the stopped waiter's queue entry has expired
	}{
		{"handed-over-while-stopped", false},
		{"queue-entry-expired", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRedis(t)
			const lease = time.Second
			name := laneName(t)
			h := newSem(t, srv.Addr, name, 1, redislane.WithLease(lease))
			xc := newClient(t, srv.Addr)
			var cnt redistest.Calls
			xc.AddHook(&cnt)
			x, err := redislane.NewWeighted(xc, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
			require.NoError(t, err)
			t.Cleanup(x.Close)
			warm(t, x) // loads the scripts
			ctx := testCtx(t)
			rc := newClient(t, srv.Addr)
			q := "{lanes:" + name + "}:g:q"

			hp, err := h.Acquire(ctx, 1)
			require.NoError(t, err)
			// The child's pub/sub messages wait at the proxy until it has
			// continued and asked Redis again, so that the stale hand-over
			// reaches it when it is queued anew.
			px := startProxy(t, srv.Addr)
			gate := make(chan struct{})
			px.held.Store(&gate)
			defer func() {
				if px.held.Swap(nil) != nil {
					close(gate)
				}
			}()
			env := helperEnvs(px.addr(), name, 1, lease)
			env["RL_W"] = "1"
			kid := startChild(t, "hold", env) // waits behind hp
			waitFor(t, 30*time.Second, "the child to queue", func() bool { return rc.ZCard(ctx, q).Val() == 1 })
			require.NoError(t, kid.cmd.Process.Signal(syscall.SIGSTOP))
			stopped := true
			defer func() {
				if stopped {
					_ = kid.cmd.Process.Signal(syscall.SIGCONT)
				}
			}()
			if tc.afterExpiry {
				waitFor(t, 10*lease, "the stopped waiter's queue entry to expire", func() bool {
					// Gone (another call removed it) or past its expiry.
					e, err := rc.ZRangeWithScores(ctx, "{lanes:"+name+"}:g:x", 0, 0).Result()
					return err == nil && (len(e) == 0 || int64(e[0].Score) < serverMillis(t, rc))
				})
			}
			hp.Release()

			evals := cnt.Evals()
			xp, err := x.Acquire(testCtx(t, 10*lease), 1)
			require.NoError(t, err, "the unit never came back from the stopped waiter")
			mine := span{Start: redistest.Now(), W: 1, Fence: xp.Fence()}
			if tc.afterExpiry {
				assert.EqualValues(t, 1, cnt.Evals()-evals, "the free unit was given to an expired queue entry")
			}

			// The waiter continues while x holds, asks Redis again and is
			// queued anew; then the message of the hand-over made while it
			// was stopped reaches it. Watch it for a lease.
			require.NoError(t, kid.cmd.Process.Signal(syscall.SIGCONT))
			stopped = false
			waitFor(t, 10*lease, "the continued waiter to queue again", func() bool { return rc.ZCard(ctx, q).Val() == 1 })
			if px.held.Swap(nil) != nil {
				close(gate)
			}
			var held event
			select {
			case e, ok := <-kid.events:
				require.True(t, ok, "the helper ended")
				held = e // too early: the oracle below tells
			case <-time.After(lease):
			}
			assert.NoError(t, xp.Context().Err())
			mine.End = endOf(xp.Deadline())
			xp.Release()
			if held.Ev == "" {
				held = kid.next(10 * lease)
			}
			require.Equal(t, "held", held.Ev)
			assert.Greater(t, held.Fence, mine.Fence, "the continued waiter holds an older grant")
			theirs := span{Start: held.Start, End: redistest.Now(), W: 1, Fence: held.Fence}
			assert.LessOrEqual(t, maxInUse([]span{mine, theirs}), int64(1),
				"the continued waiter held the unit while the other instance did")
			kid.finish()
		})
	}
}
