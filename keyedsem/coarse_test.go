package keyedsem_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
)

// With the system clock, idle stamps come from the coarse clock, a path
// that the fake-clock tests never take. An entry that has just gone idle
// is not expired by a timeout of an hour (its stamp is not in the past),
// and an entry idle for a timeout of a millisecond is expired once the
// coarse clock has moved on (its readings advance).
func TestCoarseClockStampsIdleEntries(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Hour))
	defer s.Close()
	p, err := s.Acquire(bg, "a")
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if n := s.Sweep(); n != 0 || !keyedsem.Has(s, "a") {
		t.Fatalf("Sweep evicted %d entries of an hour's idle timeout just after their release", n)
	}

	s2 := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Millisecond))
	defer s2.Close()
	p, err = s2.Acquire(bg, "a")
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	// Real time must pass for the coarse clock to move; 10 s is a failsafe
	// on a loaded machine, not a measurement.
	deadline := time.Now().Add(10 * time.Second)
	for keyedsem.Has(s2, "a") {
		if time.Now().After(deadline) {
			t.Fatal("an entry idle for 10 s was never expired with a timeout of 1 ms: the coarse clock did not move on")
		}
		s2.Sweep()
		runtime.Gosched()
	}
	if st := s2.Stats(); st.Evicted != 1 {
		t.Fatalf("Stats().Evicted = %d, want 1", st.Evicted)
	}
}

// An eviction pass must judge idleness by the time it runs, not by the
// coarse clock's last reading: that reading may be a millisecond old, or
// much older after the process was descheduled or stopped (the timer
// that moves it on is then late too), and Sweep would keep entries that
// have been idle for longer than the timeout. With a timeout of 1 ns, an
// entry released before Sweep is called has been idle longer than that by
// the time Sweep looks, whatever the coarse clock says.
func TestSweepJudgesIdlenessByTheTimeNow(t *testing.T) {
	for round := 0; round < 100; round++ {
		s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Nanosecond))
		p, err := s.Acquire(bg, "a")
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
		s.Sweep()
		if keyedsem.Has(s, "a") {
			t.Fatalf("round %d: Sweep kept an entry idle for longer than its 1 ns idle timeout (it read a stale coarse clock)", round)
		}
		s.Close()
	}
}
