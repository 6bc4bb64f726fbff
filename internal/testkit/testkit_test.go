package testkit_test

import (
	"context"
	"errors"
	"time"

	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestGoRecvEventually(t *testing.T) {
	ch := testkit.Go(func() int { return 7 })
	if got := testkit.Recv(t, ch, "the result"); got != 7 {
		t.Fatalf("Recv = %d, want 7", got)
	}
	n := 0
	testkit.Eventually(t, "n to reach 3", func() bool { n++; return n == 3 })
	done := make(chan struct{})
	close(done)
	testkit.Recv(t, done, "a closed channel")
}

// TestAllQueuedOrReturnedCountsNoCallerTwice has a caller leave the line
// and return while the waiters are being read: of two callers, one waited
// and returned meanwhile and the other has not started, so not all are
// queued or returned. Read in the other order (waiters first) the one that
// left counts twice and the check passes too early.
func TestAllQueuedOrReturnedCountsNoCallerTwice(t *testing.T) {
	var returned atomic.Uint64
	waiters := func() int {
		defer returned.Add(1) // it leaves and returns once it was counted
		return 1
	}
	if testkit.AllQueuedOrReturned(2, waiters, &returned) {
		t.Fatal("a caller that had not started was taken as queued")
	}
	// Both now returned (and nobody waits): all are accounted for.
	returned.Store(2)
	if !testkit.AllQueuedOrReturned(2, func() int { return 0 }, &returned) {
		t.Fatal("two returned callers of two were not all accounted for")
	}
}

// TestGateHoldsOneCall: a shut Gate holds the next call of Err until Open,
// and only that one; an open Gate holds nothing; Err is nil throughout.
func TestGateHoldsOneCall(t *testing.T) {
	g := testkit.NewGate()
	if g.Err() != nil || g.Done() == nil {
		t.Fatal("an open Gate: Err not nil, or Done nil")
	}
	g.Shut()
	var passed atomic.Bool
	done := testkit.Go(func() error { err := g.Err(); passed.Store(true); return err })
	g.Held(t, "the call the Gate holds")
	if passed.Load() {
		t.Fatal("the held call returned before Open")
	}
	if g.Err() != nil {
		t.Fatal("a second call of Err, while the first is held: not nil")
	}
	g.Open()
	if err := testkit.Recv(t, done, "the held call after Open"); err != nil {
		t.Fatalf("Err = %v; want nil", err)
	}
}

func TestExpiringEndsWhenTold(t *testing.T) {
	ctx := testkit.NewExpiring()
	if _, ok := ctx.Deadline(); ok || ctx.Err() != nil {
		t.Fatalf("new: deadline set %v, Err %v; want neither", ok, ctx.Err())
	}
	select {
	case <-ctx.Done():
		t.Fatal("Done closed before Expire")
	default:
	}
	at := time.Unix(1, 0)
	ctx.At = at
	if d, ok := ctx.Deadline(); !ok || !d.Equal(at) || ctx.Err() != nil {
		t.Fatalf("with At: Deadline %v, %v, Err %v; want %v, true, nil", d, ok, ctx.Err(), at)
	}
	ctx.Expire()
	testkit.Recv(t, ctx.Done(), "Done after Expire")
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after Expire = %v; want context.DeadlineExceeded", ctx.Err())
	}
}
