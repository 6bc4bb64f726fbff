package redislane_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// redisAddr is the address of the redis-server that the examples use.
var redisAddr string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		// A child process of a multi-process test: run only the helper,
		// which exits by itself.
		os.Exit(m.Run())
	}
	flag.Parse()
	srv, err := redistest.Start()
	switch {
	case err == nil:
		redisAddr = srv.Addr
	case os.Getenv("CI") == "true":
		fmt.Fprintf(os.Stderr, "redislane tests need a real redis-server and CI=true: %v\n", err)
		os.Exit(1)
	default:
		// The tests skip with the reason; examples cannot skip, so they are
		// left out.
		fmt.Fprintf(os.Stderr, "redislane: examples not run: %v\n", err)
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = f.Value.Set("^Test")
		}
	}
	code := m.Run()
	// Also the servers of tests that failed before their clean-up ran.
	redistest.StopAll()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startRedis starts a redis-server of the test's own on a free loopback port
// (persistence off) and stops it when the test ends. Without redis-server
// the test fails under CI (CI=true) and is skipped elsewhere.
func startRedis(t testing.TB) *redistest.Server {
	t.Helper()
	s, err := redistest.Start()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redislane tests need a real redis-server and CI=true: %v", err)
		}
		t.Skipf("skipping: cannot start redis-server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// testCtx returns a context that ends after d (30 s if d is 0) or when the
// test ends, for the calls of a test that must fail, not hang, when the lane
// never grants or never returns.
func testCtx(t testing.TB, d ...time.Duration) context.Context {
	t.Helper()
	limit := 30 * time.Second
	if len(d) > 0 {
		limit = d[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}

// releaser is a permit of any kind: Redis, lane adapter, local.
type releaser interface{ Release() bool }

// refused fails the test if a TryAcquire that had to fail granted, and gives
// the wrongly granted permit back, so that the test goes on to fail rather
// than hang on units nobody releases.
func refused[P releaser](t testing.TB, p P, ok bool, msgAndArgs ...any) {
	t.Helper()
	if ok {
		p.Release()
	}
	assert.False(t, ok, msgAndArgs...)
}

// failed fails the test unless an Acquire failed with target, and gives a
// wrongly granted permit back.
func failed[P releaser](t testing.TB, p P, err, target error, msgAndArgs ...any) {
	t.Helper()
	if err == nil {
		p.Release()
	}
	require.ErrorIs(t, err, target, msgAndArgs...)
}

// newClient returns a client of addr, closed when the test ends.
func newClient(t testing.TB, addr string, tweak ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: addr, DisableIdentity: true, ContextTimeoutEnabled: true}
	for _, f := range tweak {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// span is the time one permit was in use, on the system-wide monotonic
// clock: from the return of Acquire to the call of Release, or to the end of
// the lease if that came first.
type span struct {
	Start, End int64
	W          int64
	Fence      int64
}

// oracle collects spans from any number of goroutines.
type oracle struct {
	mu    sync.Mutex
	spans []span
}

func (o *oracle) add(s span) {
	o.mu.Lock()
	o.spans = append(o.spans, s)
	o.mu.Unlock()
}

// maxInUse returns the most weight in use at once (see the internal oracle package).
func maxInUse(spans []span) int64 {
	ss := make([]redistest.Span, len(spans))
	for i, x := range spans {
		ss[i] = redistest.Span{Start: x.Start, End: x.End, W: x.W}
	}
	return redistest.MaxInUse(ss)
}

// endOf returns when a permit stopped being usable: now, or its deadline if
// the lease ended first.
func endOf(deadline time.Time) int64 {
	now := redistest.Now()
	if left := time.Until(deadline); left < 0 {
		return now + int64(left)
	}
	return now
}

// checkFences fails the test if two permits share a fencing token.
func checkFences(t *testing.T, spans []span) {
	t.Helper()
	seen := make(map[int64]bool, len(spans))
	for _, s := range spans {
		if seen[s.Fence] {
			t.Fatalf("fencing token %d granted twice", s.Fence)
		}
		seen[s.Fence] = true
	}
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const helperEnv = "REDISLANE_HELPER"

var nameSeq atomic.Int64

// laneName returns a lane name unique to the test run.
func laneName(t testing.TB) string {
	return fmt.Sprintf("%s-%d", t.Name(), nameSeq.Add(1))
}

// acquireAsync runs s.Acquire(ctx, 1) in a goroutine, releases the permit
// if it got one, and sends Acquire's error on the returned channel (which
// has room for it, so the goroutine ends even if no one receives).
func acquireAsync(ctx context.Context, s *redislane.Weighted) <-chan error {
	return testkit.Go(func() error {
		p, err := s.Acquire(ctx, 1)
		if err == nil {
			p.Release()
		}
		return err
	})
}

// commandHook is the part of a go-redis hook that lets dials and pipelines
// through: a test's hook embeds it and defines only ProcessHook.
type commandHook struct{}

func (commandHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (commandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
