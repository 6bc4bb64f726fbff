package redislane_test

// Tests of rules that a mutation run found unchecked (issue 25): each of
// them fails with the deliberate bug put back that its comment names.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
)

// A TryAcquire whose grant comes back later than the margin returns false,
// and the grant is given back in the background. The reply is held in the
// client after Redis sent it (a slow network, a descheduled process), so
// the call itself succeeds. Mutation that it catches: tryAcquire without
// its check of the reply's age (it returned the permit).
func TestTryAcquireNeverUsesALateReply(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	rc := newClient(t, srv.Addr)
	const lease = 2 * time.Second // margin 400 ms
	h := &slowReplies{delay: lease/5 + 100*time.Millisecond}
	rc.AddHook(h)
	name := laneName(t)
	s, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	warm(t, s)

	h.mu.Lock()
	h.on = true
	h.mu.Unlock()
	p, ok := s.TryAcquire(1)
	h.mu.Lock()
	h.on = false
	h.mu.Unlock()
	refused(t, p, ok, "TryAcquire returned a grant whose reply came back after the margin")
	st := s.Stats()
	// On a loaded machine the call itself may time out: given up either way.
	assert.EqualValues(t, 1, st.LateReplies+st.RedisErrors, "the late reply was not counted")

	waitFor(t, 10*time.Second, "the late grant to be given back", func() bool {
		return direct.ZCard(context.Background(), "{lanes:"+name+"}:g:h").Val() == 0
	})
	p, ok = s.TryAcquire(1)
	require.True(t, ok, "the unit of the late grant did not come back")
	p.Release()
}

// With WithMaxHold shorter than the lease, a permit's first deadline is
// already cut to the grant plus the longest hold, for a grant by Acquire
// and by TryAcquire. Mutation that it catches: grant without the cut (the
// deadline was the send time plus four fifths of the lease, until the
// first refresh).
func TestFirstDeadlineIsCutToMaxHold(t *testing.T) {
	srv := startRedis(t)
	const lease = 2 * time.Second // a deadline of 1.6 s after the call
	const hold = 50 * time.Millisecond
	s := newSem(t, srv.Addr, laneName(t), 1, redislane.WithLease(lease), redislane.WithMaxHold(hold))
	for _, way := range []string{"Acquire", "TryAcquire"} {
		var p *redislane.Permit
		if way == "Acquire" {
			var err error
			p, err = s.Acquire(testCtx(t), 1)
			require.NoError(t, err)
		} else {
			var ok bool
			p, ok = s.TryAcquire(1)
			require.True(t, ok)
		}
		got := time.Now() // after the grant
		dl := p.Deadline()
		assert.False(t, dl.After(got.Add(hold)),
			"%s: the first deadline is %v after the permit was returned, past WithMaxHold(%v)", way, dl.Sub(got), hold)
		p.Release()
	}
}
