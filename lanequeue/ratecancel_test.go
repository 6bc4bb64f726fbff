package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/lanequeue"
)

// rateBench is a queue on a fake clock with a rate lane "a" (1 token a
// second, burst 4), whose grants a test counts, and a rate lane "b" that
// is empty and refills so slowly that a call naming both always waits for
// b, and fails when its context is cancelled.
type rateBench struct {
	t    *testing.T
	q    *lanequeue.Queue[string]
	fake *clock.Fake
	// grants are the grants of lane a to greedy, with the fake time.
	grants []grantAt
	calls  []pendingRate
}

type grantAt struct {
	at time.Time
	n  int
}

type pendingRate struct {
	cancel context.CancelFunc
	ch     <-chan acquireResult
}

const (
	benchRate  = 1.0
	benchBurst = 4
	sequences  = 200 // random sequences of TestRateCancelAsOfNow
)

func newRateBench(t *testing.T) *rateBench {
	t.Helper()
	fake := clock.NewFake(time.Unix(1e9, 0))
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addRate(q, "a", benchRate, benchBurst))
	must(t, addRate(q, "b", rate.Limit(1e-6), 1))
	lanequeue.SetRateClock(q, "a", fake)
	lanequeue.SetRateClock(q, "b", fake)
	if _, ok := tryAcquireAll(q, "drain", []string{"b"}); !ok {
		t.Fatal("lane b: no first token")
	}
	return &rateBench{t: t, q: q, fake: fake}
}

// greedy takes every token lane a has now.
func (rb *rateBench) greedy() int {
	n := 0
	for {
		tk, ok := tryAcquireAll(rb.q, "greedy", []string{"a"})
		if !ok {
			break
		}
		tk.Release()
		n++
	}
	if n > 0 {
		rb.grants = append(rb.grants, grantAt{rb.fake.Now(), n})
	}
	return n
}

// start begins a call naming a and b: it reserves a token on each and
// waits for b's.
func (rb *rateBench) start() {
	ctx, cancel := context.WithCancel(context.Background())
	rb.calls = append(rb.calls, pendingRate{cancel, acquireAsync(ctx, rb.q, "x", []string{"a", "b"})})
	rb.fake.BlockUntilPending(len(rb.calls))
}

// cancel cancels the i-th waiting call and waits for it to fail.
func (rb *rateBench) cancel(i int) {
	c := rb.calls[i]
	rb.calls = append(rb.calls[:i], rb.calls[i+1:]...)
	c.cancel()
	if r := receive(rb.t, c.ch); !errors.Is(r.err, context.Canceled) {
		r.t.Release()
		rb.t.Fatalf("a call waiting for lane b = %v; want context.Canceled", r.err)
	}
	// The waiter stopped its timer: wait until the clock knows.
	waitFor(rb.t, "the cancelled call's timer to stop", func() bool { return rb.fake.Pending() == len(rb.calls) })
}

// over returns the most that the grants of lane a, over any stretch of
// time, exceed what the bucket allows over it: burst + rate x length.
func (rb *rateBench) over() float64 {
	worst := -float64(benchBurst)
	for i := range rb.grants {
		sum := 0
		for j := i; j < len(rb.grants); j++ {
			sum += rb.grants[j].n
			allowed := benchBurst + benchRate*rb.grants[j].at.Sub(rb.grants[i].at).Seconds()
			worst = max(worst, float64(sum)-allowed)
		}
	}
	return worst
}

// TestRateCancelAsOfNow counts the tokens that a rate lane grants over
// time against its bucket's allowance, while calls that name it and a
// slower rate lane fail (issue 11, defect 6). Such a call's token on the
// fast lane is due at once; it used to be given back as of that due time,
// which moved the limiter's clock back and refilled the stretch since
// twice: up to about a token more than the bucket allows. Cancelled as of
// now, the token stays spent and the lane never grants more than its
// bucket allows.
func TestRateCancelAsOfNow(t *testing.T) {
	t.Run("one call", func(t *testing.T) {
		rb := newRateBench(t)
		rb.start() // a: 4 -> 3, due at once; b: waits
		rb.fake.Advance(600 * time.Millisecond)
		if n := rb.greedy(); n != 3 {
			t.Fatalf("greedy took %d tokens at 0.6s; want 3", n)
		}
		rb.fake.Advance(100 * time.Millisecond)
		rb.cancel(0)
		rb.fake.Advance(300 * time.Millisecond)
		rb.greedy()
		// Over [0.6s, 1s] the bucket allows 4 + 0.4 tokens: 3 at 0.6s and
		// 1 at 1s. Given back as of 0s, the token made it 3 and 2.
		if over := rb.over(); over > 0 {
			t.Fatalf("lane a granted %.2f tokens over its allowance", over)
		}
	})
	for _, outstanding := range []int{1, 4} {
		t.Run(fmt.Sprintf("random sequences, %d failing at once", outstanding), func(t *testing.T) {
			worst := -float64(benchBurst)
			for seed := range int64(sequences) {
				rng := rand.New(rand.NewSource(seed))
				rb := newRateBench(t)
				for range 40 {
					rb.fake.Advance(time.Duration(rng.Intn(600)) * time.Millisecond)
					switch op := rng.Intn(4); {
					case op == 0 && len(rb.calls) < outstanding:
						rb.start()
					case op == 1 && len(rb.calls) > 0:
						rb.cancel(rng.Intn(len(rb.calls)))
					default:
						rb.greedy()
					}
				}
				for len(rb.calls) > 0 {
					rb.cancel(0)
				}
				rb.fake.Advance(100 * time.Millisecond)
				rb.greedy()
				worst = max(worst, rb.over())
			}
			t.Logf("up to %d failing calls at once: tokens over allowance %.3f (worst of %d sequences)", outstanding, worst, sequences)
			if worst > 0 {
				t.Fatalf("lane a granted %.3f tokens over its allowance", worst)
			}
		})
	}
}

// BenchmarkRateCancelOverGrant reports how many tokens a rate lane grants
// over its bucket's allowance while two greedy goroutines drain it and 0,
// 1, 4 or 16 goroutines make calls naming it and an empty rate lane, wait
// for the empty lane and are cancelled, so that they reserve tokens on the
// first lane and give them back. The metric is the worst of b.N runs of
// 100ms each, counted exactly: tokens granted, plus tokens left in the
// bucket at the end, minus those at the start and the refill of the run's
// length at the lane's rate (20000 a second; the bucket never fills up).
// Above 0 is over the allowance; below 0, tokens lost (reservations that
// the limiter did not take back in full, golang/go#56924).
//
// The lane rows run this package's rate lane. The xrate rows drive a bare
// rate.Limiter as its docs suggest and as the lane once did: each
// goroutine reads the time, then calls the limiter with it (AllowN;
// ReserveN, then CancelAt as of a time read again).
// Their excess comes from x/time/rate itself: a goroutine that read the
// time and then waited for the limiter's lock behind others that read it
// later hands the limiter a time older than its last update, and the
// limiter moves its clock back to it (ReserveN, CancelAt), so that the
// stretch between refills twice. It grows with the goroutines contending
// for the limiter: cancellers add calls that pass two locks (the empty
// lane's and the first lane's) between reading the time and using it.
// The lane reads the time under a lock of its own, so its times never go
// back.
//
// The lane/deadline rows fail the calls by a deadline that comes before
// the empty lane's next token instead: they fail at once, and, since the
// lane looks before it reserves, reserve nothing.
func BenchmarkRateCancelOverGrant(b *testing.B) {
	for _, impl := range []string{"lane", "lane/deadline", "xrate"} {
		for _, cancellers := range []int{0, 1, 4, 16} {
			b.Run(fmt.Sprintf("%s/cancellers=%d", impl, cancellers), func(b *testing.B) {
				worst := math.Inf(-1)
				for range b.N {
					worst = max(worst, overGrantRun(b, impl, cancellers, 100*time.Millisecond))
				}
				b.ReportMetric(worst, "tokens-over-allowance")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func overGrantRun(b *testing.B, impl string, cancellers int, d time.Duration) float64 {
	lane := impl != "xrate"
	const (
		limit = 20000.0
		burst = 1_000_000 // never reached in a run: no refill is lost to the cap
	)
	q := lanequeue.New[string]()
	defer q.Close()
	if err := addRate(q, "a", limit, burst); err != nil {
		b.Fatal(err)
	}
	if err := addRate(q, "b", rate.Limit(1e-6), 1); err != nil {
		b.Fatal(err)
	}
	limA, limB := lanequeue.RateLimiter(q, "a"), lanequeue.RateLimiter(q, "b")
	if !limA.AllowN(time.Now(), burst) || !limB.AllowN(time.Now(), 1) {
		b.Fatal("could not drain the buckets")
	}
	var (
		stop    atomic.Bool
		granted atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	startTokens := limA.TokensAt(start)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if lane {
					if tk, ok := tryAcquireAll(q, "greedy", []string{"a"}); ok {
						tk.Release()
						granted.Add(1)
					}
				} else if limA.AllowN(time.Now(), 1) {
					granted.Add(1)
				}
			}
		}()
	}
	for range cancellers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if impl == "lane/deadline" {
					ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
					if _, err := acquireAll(q, ctx, "x", []string{"a", "b"}); err == nil {
						b.Error("a call waiting for lane b succeeded")
					}
					cancel()
					continue
				}
				if lane {
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() {
						_, err := acquireAll(q, ctx, "x", []string{"a", "b"})
						done <- err
					}()
					runtime.Gosched()
					cancel()
					if err := <-done; err == nil {
						b.Error("a call waiting for lane b succeeded")
					}
					continue
				}
				now := time.Now()
				ra, rb := limA.ReserveN(now, 1), limB.ReserveN(now, 1)
				runtime.Gosched()
				now = time.Now()
				rb.CancelAt(now)
				ra.CancelAt(now)
			}
		}()
	}
	time.Sleep(d) // the length of the run, not a synchronisation
	stop.Store(true)
	wg.Wait()
	end := time.Now()
	return float64(granted.Load()) + limA.TokensAt(end) - startTokens - limit*end.Sub(start).Seconds()
}

// TestRateTokensDueAtOnce: a call waiting for a slow rate lane gives back
// the tokens it took at once on a fast one if nothing has used the fast
// lane since, and leaves them spent if the fast lane granted tokens since
// (giving them back then could grant more than the bucket allows; see
// NewRateLane). The queue model (internal/model) does the same.
func TestRateTokensDueAtOnce(t *testing.T) {
	for _, used := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast lane used meanwhile=%v", used), func(t *testing.T) {
			q := lanequeue.New[string]()
			t.Cleanup(q.Close)
			must(t, addRate(q, "fast", rate.Limit(1e-9), 3))
			must(t, addRate(q, "slow", rate.Limit(1e-9), 1))
			if _, ok := tryAcquireAll(q, "drain", []string{"slow"}); !ok {
				t.Fatal("lane slow: no first token")
			}
			ctx, cancel := context.WithCancel(context.Background())
			ch := acquireAsync(ctx, q, "x", []string{"fast", "slow"})
			waitFor(t, "the call to wait for lane slow", func() bool { return laneStats(t, q, "slow").Waiters == 1 })
			want := 3
			if used {
				if _, ok := tryAcquireAll(q, "y", []string{"fast"}); !ok {
					t.Fatal("lane fast refused one of its two tokens left")
				}
				want = 1 // 3, less the other caller's, less the waiter's
			}
			cancel()
			if r := receive(t, ch); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("AcquireAll = %v; want context.Canceled", r.err)
			}
			left := 0
			for {
				if _, ok := tryAcquireAll(q, "z", []string{"fast"}); !ok {
					break
				}
				left++
			}
			if left != want {
				t.Fatalf("lane fast has %d tokens left after the cancellation; want %d", left, want)
			}
		})
	}
}
