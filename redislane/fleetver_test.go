package redislane_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
)

// restartFromSnapshot kills Redis and restarts it from its snapshot, and
// checks that the lane's meta hash came back.
func restartFromSnapshot(t *testing.T, srv interface{ Restart() error }, rc *redis.Client, name string) {
	t.Helper()
	require.NoError(t, srv.Restart())
	n, err := rc.Exists(context.Background(), "{lanes:"+name+"}:meta").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the snapshot was not loaded: the test proves nothing")
}

// A restart that brings the stored limit back keeps it unless the first
// caller's last read was written in a later term: a follower that has not
// read the leader's cut yet (its last read is from an earlier term) does
// not raise the limit again; a caller that read a write the snapshot
// missed brings it back.
func TestFleetRestartKeepsNewerLimit(t *testing.T) {
	for _, saveAfterCut := range []bool{true, false} {
		t.Run(map[bool]string{true: "stored-newer", false: "caller-newer"}[saveAfterCut], func(t *testing.T) {
			srv := startRedis(t)
			direct := newClient(t, srv.Addr)
			name := laneName(t)
			ctx := testCtx(t)
			const lease = time.Second
			call := func(a redislane.FleetArgs) []int64 {
				t.Helper()
				a.Lease, a.Quarantine = lease, lease
				v, err := redislane.FleetCall(ctx, direct, name, a)
				require.NoError(t, err)
				return v
			}
			r := call(redislane.FleetArgs{ID: "L", Limit: 10, Candidate: true})
			require.EqualValues(t, 1, r[0], "L does not lead")
			term := r[1]
			f := call(redislane.FleetArgs{ID: "F", Limit: 10, Seen: term}) // F reads 10
			require.EqualValues(t, 10, f[2])
			if !saveAfterCut {
				require.NoError(t, direct.Save(ctx).Err()) // the snapshot has 10
			}
			r = call(redislane.FleetArgs{ID: "L", Limit: 10, LTerm: f[4], Seen: term, Candidate: true, Set: true, Value: 4, ValueTerm: term})
			require.EqualValues(t, []int64{1, term, 4, 1, term, 0, 0}, r, "L's cut was not written (nothing held)")
			if saveAfterCut {
				require.NoError(t, direct.Save(ctx).Err()) // the snapshot has 4
				restartFromSnapshot(t, srv, direct, name)
				// F's last read is 10, from before the cut.
				r = call(redislane.FleetArgs{ID: "F", Limit: 10, LTerm: f[4], Seen: term})
			} else {
				restartFromSnapshot(t, srv, direct, name)
				// the caller read the cut (4, written in term) that the
				// snapshot missed
				r = call(redislane.FleetArgs{ID: "L", Limit: 4, LTerm: term, Seen: term})
			}
			assert.Greater(t, r[1], term, "no new term after the restart")
			assert.EqualValues(t, 4, r[2], "the limit after the restart is not the newer one")
			assert.EqualValues(t, 4, storedLimit(t, direct, name))
		})
	}
}

// A loss found first by an acquire (which does not pass the highest term
// an instance saw) may give the lane a term below one that an instance
// saw. That instance's next fleet call moves the term past it, but the
// loss was already found: the quarantine is not extended.
func TestFleetLossFoundByAcquireQuarantinedOnce(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	ctx := testCtx(t)
	mk := "{lanes:" + name + "}:meta"
	const lease = time.Second
	fa := redislane.FleetArgs{ID: "F", Limit: 5, Lease: lease, Quarantine: lease}
	_, err := redislane.FleetCall(ctx, direct, name, fa)
	require.NoError(t, err)
	require.NoError(t, direct.Save(ctx).Err())

	// F sees a term far above the server clock (as after a server whose
	// clock ran ahead): written by hand, read by F.
	now, err := direct.Time(ctx).Result()
	require.NoError(t, err)
	big := now.UnixMicro() + int64(time.Hour/time.Microsecond)
	require.NoError(t, direct.HSet(ctx, mk, "term", big).Err())
	r, err := redislane.FleetCall(ctx, direct, name, fa)
	require.NoError(t, err)
	require.EqualValues(t, big, r[1])
	fa.Seen, fa.LTerm = r[1], r[4]

	restartFromSnapshot(t, srv, direct, name)
	a, err := redislane.TryAcquireCall(ctx, direct, name, "a", 5, 0, lease, lease)
	require.NoError(t, err)
	require.EqualValues(t, []int64{0, 1}, []int64{a[0], a[2]}, "the restart was not found by the acquire")
	qu, err := direct.HGet(ctx, mk, "qu").Int64()
	require.NoError(t, err)
	term, err := direct.HGet(ctx, mk, "term").Int64()
	require.NoError(t, err)
	require.Less(t, term, big, "the acquire's term is not below F's: the test proves nothing")
	// The server clock moves past the acquire's millisecond, so that a
	// second quarantine would end later than the first.
	waitFor(t, 10*time.Second, "the server clock to move on", func() bool {
		tm, err := direct.Time(ctx).Result()
		require.NoError(t, err)
		return tm.UnixMilli() > qu-lease.Milliseconds()
	})

	r, err = redislane.FleetCall(ctx, direct, name, fa)
	require.NoError(t, err)
	assert.Greater(t, r[1], big, "the term is not above the one F saw")
	qu2, err := direct.HGet(ctx, mk, "qu").Int64()
	require.NoError(t, err)
	assert.Equal(t, qu, qu2, "the lane was quarantined a second time for the same loss")
}
