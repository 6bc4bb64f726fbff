package lockbench_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sessionlane/lanes/bench/redispeers/lockbench"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// redisAddr is the address of the tests' redis-server; empty when none could
// be started (the tests that need one skip, unless CI=true).
var redisAddr string

func TestMain(m *testing.M) {
	srv, err := redistest.Start()
	switch {
	case err == nil:
		redisAddr = srv.Addr
	case os.Getenv("CI") == "true":
		fmt.Fprintf(os.Stderr, "lockbench tests need a real redis-server and CI=true: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func needRedis(t *testing.T) {
	t.Helper()
	if redisAddr == "" {
		t.Skip("skipping: no redis-server (apt-get install redis-server)")
	}
}

// shortRun is a run small enough for go test -race: 2 groups of 4
// contenders, 1 ms holds, 400 ms per lock.
func shortRun(t *testing.T) lockbench.Config {
	return lockbench.Config{
		Addr: redisAddr, Key: fmt.Sprintf("lockbench-test-%s-%d", t.Name(), time.Now().UnixNano()),
		Groups: 2, Contenders: 4, Hold: time.Millisecond, TTL: 2 * time.Second, Duration: 400 * time.Millisecond,
	}
}

func TestMostInUseCountsOverlapsAndTouchingSpans(t *testing.T) {
	cases := []struct {
		name  string
		spans []lockbench.Span
		want  int
	}{
		{"none", nil, 0},
		{"one after another", []lockbench.Span{{0, 10}, {11, 20}, {21, 30}}, 1},
		{"touching counts as overlapping", []lockbench.Span{{0, 10}, {10, 20}}, 2},
		{"nested", []lockbench.Span{{0, 100}, {10, 20}, {15, 30}}, 3},
		{"unsorted", []lockbench.Span{{50, 60}, {0, 10}, {55, 70}}, 2},
	}
	for _, c := range cases {
		if got := lockbench.MostInUse(c.spans); got != c.want {
			t.Errorf("%s: MostInUse = %d, want %d", c.name, got, c.want)
		}
	}
}

// twoIn is a broken lock: a semaphore of 2 shared by every group, which
// never asks Redis.
type twoIn struct{ slots chan struct{} }

func (l twoIn) Lock(ctx context.Context) (lockbench.Held, error) {
	select {
	case l.slots <- struct{}{}:
		return twoInHeld{l}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (twoIn) Close() {}

type twoInHeld struct{ l twoIn }

func (twoInHeld) ValidUntil() time.Time { return time.Time{} }
func (h twoInHeld) Unlock()             { <-h.l.slots }

// The harness must catch a lock that lets two holders in: otherwise a fast
// but wrong lock would win the table.
func TestOracleCatchesALockThatLetsTwoIn(t *testing.T) {
	needRedis(t)
	shared := twoIn{slots: make(chan struct{}, 2)}
	broken := lockbench.Impl{Name: "two-in", New: func(*redis.Client, lockbench.Config) (lockbench.Locker, error) {
		return shared, nil
	}}
	cfg := shortRun(t)
	cfg.Hold = 2 * time.Millisecond // while one holds, one of the 7 others takes the second slot
	r, err := lockbench.RunInProcess(broken, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Grants == 0 {
		t.Fatal("the broken lock granted nothing")
	}
	if r.MostInUse != 2 || r.Exclusive() {
		t.Fatalf("MostInUse = %d, Exclusive = %v over %d grants of a lock that lets two in; want 2, false",
			r.MostInUse, r.Exclusive(), r.Grants)
	}
}

// Every lock of the comparison keeps one holder at a time in a short run,
// and the harness counts its grants and its Redis commands.
func TestLocksExclusion(t *testing.T) {
	needRedis(t)
	for _, im := range lockbench.Impls() {
		t.Run(im.Name, func(t *testing.T) {
			cfg := shortRun(t)
			r, err := lockbench.RunInProcess(im, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Exclusive() {
				t.Errorf("%d holders at once", r.MostInUse)
			}
			if r.Grants == 0 || r.CallsPerGrant <= 0 {
				t.Errorf("grants %d, calls per grant %.2f: want both above 0", r.Grants, r.CallsPerGrant)
			}
			if r.Errors > 0 {
				t.Errorf("%d lock errors, the first: %s", r.Errors, r.FirstError)
			}
			if r.Longest < r.WaitP99 || r.WaitP99 < r.WaitP50 {
				t.Errorf("p50 %v, p99 %v, longest %v: not in order", r.WaitP50, r.WaitP99, r.Longest)
			}
		})
	}
}
