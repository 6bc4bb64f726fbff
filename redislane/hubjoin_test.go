package redislane_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
)

// Close joins the pub/sub goroutines its lane set off: the receive loop of a
// connection whose last channel was the lane's, and the subscription of the
// lane's channel. The count is read the moment Close returns, with no
// polling. Before, a lane that shared its client with another open lane
// left the receive loop it had started running until that other lane
// closed too, and Close waited for nothing of the hub's.
func TestCloseJoinsHubGoroutines(t *testing.T) {
	srv := startRedis(t)
	for _, tc := range []struct {
		name   string
		shared bool // another lane, never waiting, stays open on the client
	}{{"last lane of its client", false}, {"client shared with an open lane", true}} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newClient(t, srv.Addr)
			closeOther := func() {}
			if tc.shared {
				other, err := redislane.NewWeighted(rc, laneName(t), 1)
				require.NoError(t, err)
				defer other.Close() // if the test fails early
				closeOther = other.Close
			}
			for round := range 50 {
				s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithQuarantine(0))
				require.NoError(t, err)
				p, err := s.Acquire(testCtx(t), 1) // subscribes: starts the receive loop
				require.NoError(t, err)
				p.Release()
				s.Close()
				require.Zero(t, redislane.HubGoroutines(s), "round %d: hub goroutines still running when Close returned", round)
			}
			closeOther()
			assert.Empty(t, laneGoroutinesAfterClose(), "goroutines left behind by Close")
		})
	}
}
