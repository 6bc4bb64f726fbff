package hist_test

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/hist"
	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// Scale keeps the proportions and makes the total exact, the remainders
// going to the largest fractions.
func TestScaleToExactCount(t *testing.T) {
	var c [hist.Buckets]uint64
	c[0], c[3], c[7] = 1, 1, 1 // three timed waits
	count, sum := hist.Scale(&c, 3, 300, 10)
	if count != 10 || sum != 1000 {
		t.Fatalf("count %d, sum %d; want 10, 1000", count, sum)
	}
	var total uint64
	for _, n := range c {
		total += n
	}
	if total != 10 || c[0] != 4 || c[3] != 3 || c[7] != 3 {
		t.Fatalf("counts %v (total %d); want 4, 3, 3 in buckets 0, 3, 7", c, total)
	}
}

func TestScaleChangesNothingWhenNothingWasSampledOut(t *testing.T) {
	var c [hist.Buckets]uint64
	c[2] = 5
	if count, sum := hist.Scale(&c, 5, 77, 5); count != 5 || sum != 77 || c[2] != 5 {
		t.Fatalf("count %d, sum %d, counts %v; want them unchanged", count, sum, c)
	}
	var empty [hist.Buckets]uint64
	if count, sum := hist.Scale(&empty, 0, 0, 9); count != 0 || sum != 0 || empty != ([hist.Buckets]uint64{}) {
		t.Fatalf("an empty sample scaled to %d, %d, %v; want it left empty", count, sum, empty)
	}
}

func TestScaleLargeNumbers(t *testing.T) {
	var c [hist.Buckets]uint64
	c[4], c[5] = 1<<40, 1<<40
	count, sum := hist.Scale(&c, 1<<41, 1<<50, 1<<45) // sum*to needs 95 bits
	if count != 1<<45 || c[4] != 1<<44 || c[5] != 1<<44 || sum != 1<<54 {
		t.Fatalf("count %d, sum %d, counts %d %d", count, sum, c[4], c[5])
	}
}

// On the real clock a lane times its first waits, then one in
// SampleEvery by the waiter's rotation; on a fake clock every wait.
func TestSamplerTimesFirstWaitsThenOneInN(t *testing.T) {
	var real hist.Clock
	var s hist.Sampler
	first := 0
	for rot := uint32(1); s.Timed(&real, rot); rot += 2 { // odd: never a multiple of SampleEvery
		first++
		if first > 1<<20 {
			t.Fatal("the sampler never stopped timing every wait")
		}
	}
	if first < 100 {
		t.Fatalf("only the first %d waits were all timed", first)
	}
	timed := 0
	for rot := uint32(0); rot < 16*hist.SampleEvery; rot++ {
		if s.Timed(&real, rot) {
			timed++
		}
	}
	if timed != 16 {
		t.Fatalf("%d of %d waits timed after the first ones; want 16", timed, 16*hist.SampleEvery)
	}
	fake := hist.NewClock(clock.NewFake(time.Unix(0, 0)))
	for rot := uint32(1); rot < 4096; rot++ {
		if !s.Timed(&fake, rot) {
			t.Fatalf("a wait on a fake clock (rotation %d) was not timed", rot)
		}
	}
}
