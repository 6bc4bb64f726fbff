package fuzz_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the run if an input leaves a goroutine behind: every
// waiter a target starts must have been woken and have returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// maxOps bounds the operations decoded from one input, and maxWaiters the
// goroutines waiting at once, so that an input runs in milliseconds.
const (
	maxOps     = 256
	maxWaiters = 24
)

// hang is how long the driver waits for something the model says must
// happen (a waiter queued, a waiter woken) before it calls it a hang. It
// is a guard against a stuck input, not a timing assertion: a correct
// implementation gets there in microseconds.
const hang = 20 * time.Second

// watchdog makes an input that runs longer than twice the hang guard crash
// the process with every goroutine's stack, so that a call into the
// library that never returns (no guard of the driver can see it) becomes
// a crasher the fuzzer saves, not a stalled worker. Call the returned stop
// when the input is done.
func watchdog() (stop func()) {
	t := time.AfterFunc(2*hang, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		panic(fmt.Sprintf("fuzz: an input still runs after %v: a call never returned\n%s", 2*hang, buf[:n]))
	})
	return func() { t.Stop() }
}

// input reads an operation sequence out of fuzz bytes; past the end it
// reads zeros.
type input struct {
	b []byte
	i int
}

func (in *input) more() bool { return in.i < len(in.b) }

func (in *input) byte() byte {
	if in.i >= len(in.b) {
		return 0
	}
	c := in.b[in.i]
	in.i++
	return c
}

// eventually polls cond, yielding the processor, until it holds; it fails
// the test after the hang guard.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("hang: %s", what)
		}
		runtime.Gosched()
	}
}

// receive waits for the result of a goroutine the model says has been
// woken; it fails the test after the hang guard.
func receive[T any](t testing.TB, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	default:
	}
	timer := time.NewTimer(hang)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("hang: %s was not woken", what)
	}
	panic("unreachable")
}
