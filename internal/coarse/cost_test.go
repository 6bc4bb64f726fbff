//go:build unix

package coarse_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/coarse"
)

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		b.Fatal(err)
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// BenchmarkTimerTick is what the coarse clock's timer costs a process
// whose cores are otherwise idle: an op is one tick (a timer of
// Resolution, reset from its own function, as Clock's is), and cpu-ns/op
// the process's CPU time per tick. Compare it with
// BenchmarkSystemClockRead: the clock starts its timer at TickReads reads
// a Resolution.
func BenchmarkTimerTick(b *testing.B) {
	done := make(chan struct{})
	n := 0
	var tm *time.Timer
	tm = time.AfterFunc(time.Hour, func() {
		n++
		if n == b.N {
			close(done)
			return
		}
		tm.Reset(coarse.Resolution)
	})
	c0 := cpuTime(b)
	tm.Reset(coarse.Resolution) // started once tm is set: the function reads it
	<-done
	b.ReportMetric(float64(cpuTime(b)-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkSystemClockRead is a read of the system clock, as Clock takes
// one while its timer is stopped.
func BenchmarkSystemClockRead(b *testing.B) {
	epoch := time.Now()
	var s time.Duration
	for range b.N {
		s += time.Since(epoch)
	}
	if s < 0 {
		b.Fatal("the clock went back")
	}
}

// BenchmarkRead is Clock.Read in a tight loop (the timer runs after the
// first TickReads reads), beside BenchmarkSystemClockRead.
func BenchmarkRead(b *testing.B) {
	var c coarse.Clock
	c.Init(time.Now())
	defer c.Stop()
	var s int64
	for range b.N {
		s += c.Read()
	}
	if s < 0 {
		b.Fatal("the clock went back")
	}
}
