package adaptive_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A gateway's global lane in front of a model API, driven by an AIMD
// controller: the lane's Do reports each call's error to the controller,
// with no code at the call site. The API's client wraps ErrOverload into
// its error for a 429.
func Example_lanequeue() {
	q := lanequeue.New[string]()
	defer q.Close()
	sem := semaphore.New(4)
	if err := q.Add("model", lanequeue.NewGlobalLane[string](sem)); err != nil {
		panic(err)
	}
	ctl, err := adaptive.New(sem, 1, 64, adaptive.WithInitial(2))
	if err != nil {
		panic(err)
	}
	if err := q.ObserveLane("model", ctl); err != nil {
		panic(err)
	}
	lanes, err := q.Lanes("model")
	if err != nil {
		panic(err)
	}
	callModel := func(context.Context) error {
		return fmt.Errorf("%w: HTTP 429 Too Many Requests", adaptive.ErrOverload)
	}
	fmt.Println("limit:", sem.Capacity())
	for _, thread := range []string{"t1", "t2"} { // a round trip at limit 2
		err := q.Do(context.Background(), thread, lanes, callModel)
		fmt.Println(thread+":", err)
	}
	st := ctl.Stats()
	fmt.Println("limit:", sem.Capacity(), "after", st.LastReason)
	// Output:
	// limit: 2
	// t1: lanes: provider overloaded: HTTP 429 Too Many Requests
	// t2: lanes: provider overloaded: HTTP 429 Too Many Requests
	// limit: 1 after overload
}

// simClock is a simulation's clock: it moves when the simulation says.
type simClock struct{ now time.Time }

func (c *simClock) Now() time.Time                         { return c.now }
func (c *simClock) NewTimer(time.Duration) semaphore.Timer { panic("not used") }

// A provider whose real limit is 5, which the lane does not know: each
// second the callers fill the lane, the provider refuses the calls beyond
// 5, and each call reports by hand. AIMD with backoff 0.5 halves the limit
// on a round trip with a refusal and adds 1 after one without: its
// sawtooth stays within [floor(0.5*6), 5+1]. Until the first refusal a
// round trip is the limit's worth of reports; after it, the controller
// probes the provider's limit at most once per 300 reports (a round trip
// of 300/max(1, 0.5*limit) reports here), so that the refusals stay a
// small share of the calls.
func ExampleController_Report() {
	clk := &simClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	sem := semaphore.New(16)
	ctl, err := adaptive.New(sem, 1, 16, adaptive.WithAIMD(1, 0.5), adaptive.WithClock(clk))
	if err != nil {
		panic(err)
	}
	const providerLimit = 5
	calls, refused := 0, 0
	fmt.Print(sem.Capacity())
	for ctl.Stats().Windows < 8 {
		windows := ctl.Stats().Windows
		var held []semaphore.Permit
		for {
			p, ok := sem.TryAcquire(1)
			if !ok {
				break
			}
			held = append(held, p)
		}
		clk.now = clk.now.Add(time.Second) // the calls take a second
		for j, p := range held {
			outcome := adaptive.Success
			if j >= providerLimit {
				outcome = adaptive.Overload // 429
				refused++
			}
			calls++
			ctl.Report(outcome, time.Second)
			p.Release()
		}
		if ctl.Stats().Windows != windows {
			fmt.Print(" ", sem.Capacity()) // a round trip ended
		}
	}
	st := ctl.Stats()
	fmt.Printf("\nincreases %d, decreases on overload %d, %d of %d calls refused\n", st.Increases, st.OverloadDecreases, refused, calls)
	// Output:
	// 16 8 4 5 6 3 4 5 6
	// increases 5, decreases on overload 3, 15 of 775 calls refused
}

// Do takes the permit from the controller's semaphore, runs the call, and
// reports its error and duration: a success in a round trip that used
// the lane raises the limit, a round trip with a 429 lowers it.
func ExampleController_Do() {
	clk := &simClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	sem := semaphore.New(1)
	ctl, err := adaptive.New(sem, 1, 8, adaptive.WithClock(clk))
	if err != nil {
		panic(err)
	}
	ok := func(context.Context) error {
		clk.now = clk.now.Add(time.Second) // the call takes a second
		return nil
	}
	refused := func(context.Context) error {
		return fmt.Errorf("%w: HTTP 429", adaptive.ErrOverload)
	}
	ctx := context.Background()
	fmt.Println("limit", sem.Capacity())
	_ = ctl.Do(ctx, 1, ok) // a round trip of one call
	fmt.Println("limit", sem.Capacity(), "after", ctl.Stats().LastReason)
	_ = ctl.Do(ctx, 1, ok) // a round trip of two
	_ = ctl.Do(ctx, 1, refused)
	fmt.Println("limit", sem.Capacity(), "after", ctl.Stats().LastReason)
	// Output:
	// limit 1
	// limit 2 after growth
	// limit 1 after overload
}
