// Package modelcheck holds the model-based drivers of lanes' tests: each
// drives one real primitive and its sequential reference model of
// internal/model with the same random operations, one at a time, and
// checks after every step that they agree (outcomes, who was woken and
// how, Stats field by field, and the invariants).
//
// A driver is a rapid property, func(*rapid.T), written once and run two
// ways: by the package's model test with rapid.Check (random and shrunk
// cases, -rapid.seed replays), and by the fuzz target of fuzz/ with
// rapid.MakeFuzz (the fuzzer's bytes are the draws). So an operation or a
// check is added in one place and both sides have it.
//
// The drivers are for tests only; the package has no other use.
package modelcheck

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// Hang is how long a driver waits for something the model says must
// happen (a waiter queued, a waiter woken) before it calls it a hang. It is
// a guard against a stuck case, not a timing assertion: a correct
// implementation gets there in microseconds.
const Hang = 20 * time.Second

// gaveUp is set once a wait of a driver has run out: the implementation
// under test loses calls. rapid then replays the failing case many times
// as it shrinks it, and each replay would wait Hang again (the step, then
// cleanup), so that a test that found a lost waiter ran for minutes, and
// with a few such tests into the binary's timeout, before it said so.
// After the first, waits give up after shortHang.
var gaveUp atomic.Bool

const shortHang = 200 * time.Millisecond

// hang is how long a driver waits for what the model says must happen.
func hang() time.Duration {
	if gaveUp.Load() {
		return shortHang
	}
	return Hang
}

// watchdog makes a case that runs longer than twice the hang guard crash
// the process with every goroutine's stack, so that a call into the library
// that never returns (no guard of the driver can see it) becomes a crasher
// the fuzzer saves, not a stalled worker. Call the returned stop when the
// case is done.
func watchdog() (stop func()) {
	t := time.AfterFunc(2*Hang, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		panic(fmt.Sprintf("modelcheck: a case still runs after %v: a call never returned\n%s", 2*Hang, buf[:n]))
	})
	return func() { t.Stop() }
}

// skip ends an operation that cannot run in the current state (nobody
// waits, no permit is out). Under rapid.Check it is t.Skip: rapid draws
// another operation. On fuzz bytes (fuzz set) it does nothing and the
// caller returns: the same bytes would draw the same operation again and
// again, and rapid would fail the input with "can't find a valid
// (non-skipped) action".
func skip(t *rapid.T, fuzz bool, why string) {
	if !fuzz {
		t.Skip(why)
	}
}

// drawID draws one of the ids of m (in order, so that a case replays);
// if m is empty it skips (see skip) with why and returns false.
func drawID[V any](t *rapid.T, fuzz bool, m map[int]V, why string) (int, bool) {
	if len(m) == 0 {
		skip(t, fuzz, why)
		return 0, false
	}
	return rapid.SampledFrom(slices.Sorted(maps.Keys(m))).Draw(t, "permit"), true
}

// spin polls cond, yielding the processor, until it holds; it calls fail
// after the hang guard.
func spin(what string, cond func() bool, fail func(format string, args ...any)) {
	d := hang()
	deadline := time.Now().Add(d)
	for i := 0; !cond(); i++ {
		if i%1024 == 0 && time.Now().After(deadline) {
			gaveUp.Store(true)
			fail("hang: gave up waiting (%v) for %s", d, what)
			return
		}
		runtime.Gosched()
	}
}

// Bounds of a fuzz input, as the fuzzer's mutations can make inputs whose
// draws never stop the run (a run of 0xff bytes keeps rapid's Repeat
// going): at most maxOps operations, then the run finishes; at most
// maxWaiters goroutines waiting at once. A case of rapid.Check has about
// 30 operations and stays far below both.
const (
	maxOps     = 256
	maxWaiters = 24
)

// drive runs one case of a driver: the actions (with their check, under
// the key "") until rapid stops, then finish; cleanup ends the case's
// goroutines, pass or fail; a watchdog guards it all.
func drive(t *rapid.T, fuzz bool, cleanup, finish func(), actions map[string]func(*rapid.T)) {
	defer watchdog()()
	defer cleanup()
	st := &run{fuzz: fuzz, finish: finish}
	defer func() { st.recovered(recover()) }()
	t.Repeat(st.steps(actions))
	finish()
}

// run is the bookkeeping of one case around a driver's operations.
type run struct {
	fuzz   bool   // on fuzz bytes (see skip)
	finish func() // the driver's end-of-run checks
	busy   bool   // an operation is running
	ops    int    // operations started
	done   bool   // finish has run
}

// steps wraps the actions of a driver: each operation marks the run busy
// while it runs, and on fuzz bytes the check after the maxOps-th operation
// finishes the run and skips the rest of the input.
func (r *run) steps(actions map[string]func(*rapid.T)) map[string]func(*rapid.T) {
	out := make(map[string]func(*rapid.T), len(actions))
	for name, a := range actions {
		if name == "" {
			out[name] = func(t *rapid.T) {
				a(t)
				if r.fuzz && r.ops >= maxOps && !r.done {
					r.done = true
					r.finish()
					t.SkipNow()
				}
			}
			continue
		}
		out[name] = func(t *rapid.T) {
			r.busy = true
			r.ops++
			a(t)
			r.busy = false
		}
	}
	return out
}

// recovered is deferred by a driver: a fuzz input that runs out of bytes
// between two operations still gets the end-of-run checks before rapid
// skips it (most fuzz inputs end so). v is what the driver recovered; it
// is panicked again.
func (r *run) recovered(v any) {
	if v == nil {
		return
	}
	if r.fuzz && !r.busy && !r.done && outOfBytes(v) {
		r.done = true
		r.finish()
	}
	panic(v)
}

// outOfBytes reports whether v, recovered from a driver, is rapid's panic
// for a fuzz input that ran out of bytes (rapid then skips the input).
func outOfBytes(v any) bool { return fmt.Sprintf("%T", v) == "rapid.invalidData" }

// errOf maps a model outcome to the error a semaphore returns, given the
// package's own ErrClosed and ErrQueueFull.
func errOf(e model.Err, closed, full error) error {
	switch e {
	case model.OK:
		return nil
	case model.InvalidWeight:
		return semaphore.ErrInvalidWeight
	case model.TooHeavy:
		return semaphore.ErrTooHeavy
	case model.Closed:
		return closed
	case model.QueueFull:
		return full
	case model.Cancelled:
		return context.Canceled
	case model.WaitTooLong:
		return semaphore.ErrWaitTooLong
	case model.InvalidTurn:
		return semaphore.ErrInvalidConfig // wrapped: compare with errors.Is
	case model.TooManyKeys:
		return keyedsem.ErrTooManyKeys
	}
	panic(fmt.Sprintf("unknown model outcome %v", e))
}

// journal keeps the steps of a case, for failure messages.
type journal []string

func (j *journal) logf(format string, args ...any) { *j = append(*j, fmt.Sprintf(format, args...)) }

func (j journal) String() string { return strings.Join(j, "\n  ") }
