package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
)

// fakeLine is a line of capacity 1 whose place 1 was granted at Join and
// whose other places queue when their Wait is called: by place (the order
// joined) if byPlace, else in the order of the Waits, as a place that
// took its turn at Wait would.
type fakeLine struct {
	byPlace bool
	mu      sync.Mutex
	queue   []int
	turn    map[int]chan struct{}
}

type fakePermit struct{ l *fakeLine }

func (p fakePermit) Release() bool {
	p.l.mu.Lock()
	defer p.l.mu.Unlock()
	if len(p.l.queue) > 0 {
		next := p.l.queue[0]
		p.l.queue = p.l.queue[1:]
		close(p.l.turn[next])
	}
	return true
}

func (l *fakeLine) wait(ctx context.Context, i int) (fakePermit, error) {
	if i == 1 {
		return fakePermit{l}, nil
	}
	l.mu.Lock()
	ch := make(chan struct{})
	l.turn[i] = ch
	l.queue = append(l.queue, i)
	if l.byPlace {
		slices.Sort(l.queue)
	}
	l.mu.Unlock()
	select {
	case <-ch:
		return fakePermit{l}, nil
	case <-ctx.Done():
		return fakePermit{}, ctx.Err()
	}
}

func (l *fakeLine) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// recorder is a testing.TB that records a failure and ends the goroutine
// that failed, as testing.T does.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// TestServedInJoinOrder passes a line that serves its places in the
// order joined, and fails one that serves them in the order of their
// Waits.
func TestServedInJoinOrder(t *testing.T) {
	for _, byPlace := range []bool{true, false} {
		l := &fakeLine{byPlace: byPlace, turn: make(map[int]chan struct{})}
		rec := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testkit.ServedInJoinOrder(rec, 6, l.waiting, l.wait)
		}()
		testkit.Recv(t, done, "ServedInJoinOrder")
		if failed := len(rec.failed) > 0; failed == byPlace {
			t.Fatalf("a line serving by place=%v: failures %q", byPlace, rec.failed)
		}
	}
}

// TestRacePlace: each mode ends the place its way, takes the outcomes the
// mode allows as no permit, and reports any other.
func TestRacePlace(t *testing.T) {
	used := errors.New("used")
	other := errors.New("closed")
	for _, c := range []struct {
		mode    int
		err     error // what Wait returns
		ok, bad bool  // want
		waited  bool  // Wait is called
	}{
		{0, nil, false, false, false},
		{1, nil, true, false, true},
		{1, context.Canceled, false, false, true},
		{1, used, false, true, true},
		{2, used, false, false, true},
		{2, other, false, true, true},
		{3, nil, true, false, true},
		{3, used, false, true, true},
		{3, other, false, true, true},
	} {
		var mu sync.Mutex
		waited, left := false, 0
		wait := func(ctx context.Context) (int, error) {
			mu.Lock()
			waited = true
			mu.Unlock()
			if c.err == context.Canceled {
				select {
				case <-ctx.Done():
					return 0, ctx.Err()
				case <-time.After(testkit.Deadline):
					return 0, errors.New("the context never ended")
				}
			}
			if c.err != nil {
				return 0, c.err
			}
			return 7, nil
		}
		leaves := make(chan struct{}, 2)
		leave := func() { leaves <- struct{}{} }
		v, ok, err := testkit.RacePlace(c.mode, wait, leave, used)
		if ok != c.ok || (err != nil) != c.bad || (ok && v != 7) {
			t.Errorf("mode %d, Wait error %v: (%d, %v, %v); want ok %v, an error %v", c.mode, c.err, v, ok, err, c.ok, c.bad)
		}
		mu.Lock()
		if waited != c.waited {
			t.Errorf("mode %d: Wait called %v; want %v", c.mode, waited, c.waited)
		}
		mu.Unlock()
		if c.mode == 0 || c.mode == 2 || c.mode == 1 && c.err != nil {
			testkit.Recv(t, leaves, fmt.Sprintf("mode %d: the Leave", c.mode))
			left++
		}
		if len(leaves) != 0 {
			t.Errorf("mode %d, Wait error %v: Leave called more than %d times", c.mode, c.err, left)
		}
	}
}
