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
	"fmt"
	"runtime"
	"time"

	"pgregory.net/rapid"
)

// Hang is how long a driver waits for something the model says must
// happen (a waiter queued, a waiter woken) before it calls it a hang. It is
// a guard against a stuck case, not a timing assertion: a correct
// implementation gets there in microseconds.
const Hang = 20 * time.Second

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

// spin polls cond, yielding the processor, until it holds; it calls fail
// after the hang guard.
func spin(what string, cond func() bool, fail func(format string, args ...any)) {
	deadline := time.Now().Add(Hang)
	for i := 0; !cond(); i++ {
		if i%1024 == 0 && time.Now().After(deadline) {
			fail("hang: gave up waiting (%v) for %s", Hang, what)
			return
		}
		runtime.Gosched()
	}
}

// steps wraps the actions of a driver so that *busy tells whether one is
// running.
func steps(busy *bool, actions map[string]func(*rapid.T)) map[string]func(*rapid.T) {
	out := make(map[string]func(*rapid.T), len(actions))
	for name, a := range actions {
		if name == "" {
			out[name] = a
			continue
		}
		out[name] = func(t *rapid.T) {
			*busy = true
			a(t)
			*busy = false
		}
	}
	return out
}

// outOfBytes reports whether v, recovered from a driver, is rapid's panic
// for a fuzz input that ran out of bytes (rapid then skips the input).
func outOfBytes(v any) bool { return fmt.Sprintf("%T", v) == "rapid.invalidData" }
