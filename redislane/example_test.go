package redislane_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/semaphore"
)

// A gateway fleet shares one budget of concurrent calls to a model API.
// Every instance makes the same Weighted (same name, same limit); a
// request holds one unit while it calls the API.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()

	// WithQuarantine(0): this example's Redis is fresh, so no holder can
	// predate it. Keep the default (one lease) in production.
	budget, err := redislane.NewWeighted(client, "example-model-api", 10,
		redislane.WithLease(2*time.Second), redislane.WithQuarantine(0))
	if err != nil {
		panic(err)
	}
	defer budget.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := budget.Do(ctx, 1, func(ctx context.Context) error {
				// Call the model API with ctx: it ends if the lease is lost.
				return nil
			})
			if err != nil {
				fmt.Println("request failed:", err)
			}
		}()
	}
	wg.Wait()
	st := budget.Stats()
	fmt.Println("calls:", st.Acquired, "held now:", st.Held)
	// Output:
	// calls: 20 held now: 0
}

// The messages of one conversation run one at a time, in the order they
// arrive, whichever instance received them; other conversations run in
// parallel.
func ExampleKeyed() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	threads, err := redislane.NewKeyed(client, "example-threads", 1,
		redislane.WithLease(2*time.Second), redislane.WithQuarantine(0))
	if err != nil {
		panic(err)
	}
	defer threads.Close()

	ctx := context.Background()
	first, err := threads.Acquire(ctx, "slack/C42/1700000000.1")
	if err != nil {
		panic(err)
	}
	_, sameFree := threads.TryAcquire("slack/C42/1700000000.1")
	other, otherFree := threads.TryAcquire("slack/C42/1700000099.7")
	fmt.Println("same thread free:", sameFree, "other thread free:", otherFree)
	other.Release()
	first.Release()
	// Output:
	// same thread free: false other thread free: true
}

// Round-robin routing sends a thread's messages to different replicas,
// and message 3 comes before message 2: with sequence order and a reorder
// hold, 3 waits for 2 (for at most the hold) whichever replica got it.
func ExampleWithReorderHold() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	replica := func() *redislane.Keyed {
		k, err := redislane.NewKeyed(client, "example-ordered-threads", 1,
			redislane.WithSequenceOrder(), redislane.WithReorderHold(5*time.Second),
			redislane.WithLease(2*time.Second), redislane.WithQuarantine(0))
		if err != nil {
			panic(err)
		}
		return k
	}
	a, b := replica(), replica()
	defer a.Close()
	defer b.Close()

	ctx := context.Background()
	handle := func(k *redislane.Keyed, n int64) {
		p, err := k.Acquire(ctx, "slack/C42/1700000000.1", semaphore.Sequence(n))
		if err != nil {
			panic(err)
		}
		fmt.Println("message", n)
		p.Release()
	}
	handle(a, 1)
	done := make(chan struct{})
	go func() { handle(b, 3); close(done) }()
	for b.Stats().Waiters == 0 { // 3 has reached b, and waits for 2
		time.Sleep(time.Millisecond)
	}
	handle(a, 2)
	<-done
	fmt.Println("holds run out:", a.Stats().HoldsRunOut+b.Stats().HoldsRunOut)
	// Output:
	// message 1
	// message 2
	// message 3
	// holds run out: 0
}

// The fencing token makes a holder that lost its lease harmless: the
// protected store remembers the highest token it accepted and rejects
// writes that carry a lower one.
func ExamplePermit_Fence() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	lock, err := redislane.NewKeyed(client, "example-fenced", 1,
		redislane.WithLease(2*time.Second), redislane.WithQuarantine(0))
	if err != nil {
		panic(err)
	}
	defer lock.Close()

	store := &fencedStore{}
	ctx := context.Background()
	old, _ := lock.Acquire(ctx, "report-7")
	staleToken := old.Fence()
	old.Release() // (say the holder paused, and its lease ran out)

	p, _ := lock.Acquire(ctx, "report-7")
	fmt.Println(store.write(p.Fence(), "v2"))
	fmt.Println(store.write(staleToken, "v1 from the paused holder"))
	p.Release()
	// Output:
	// wrote v2
	// rejected: token is older than one already seen
}

type fencedStore struct {
	mu      sync.Mutex
	highest int64
	value   string
}

func (s *fencedStore) write(token int64, v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return "rejected: token is older than one already seen"
	}
	s.highest, s.value = token, v
	return "wrote " + v
}

// Two instances share a fleet limit that a controller moves at run time.
// Only the elected leader's SetCapacity calls are written; every instance
// reads the new limit within one refresh interval.
func ExampleFleet() {
	a, b := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true}),
		redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer a.Close()
	defer b.Close()
	opts := []redislane.Option{redislane.WithLease(2 * time.Second), redislane.WithQuarantine(0),
		redislane.WithLimitRefresh(200 * time.Millisecond)}
	first, err := redislane.NewFleet(a, "example-fleet", 10, opts...)
	if err != nil {
		panic(err)
	}
	defer first.Close()
	second, err := redislane.NewFleet(b, "example-fleet", 10, opts...)
	if err != nil {
		panic(err)
	}
	defer second.Close()

	first.SetCapacity(10) // a candidate now; nobody leads yet, so dropped
	for !first.Leader() {
		time.Sleep(10 * time.Millisecond)
	}
	first.SetCapacity(4)  // the leader's: written
	second.SetCapacity(7) // a follower's: dropped
	for second.Capacity() != 4 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("leader:", first.Leader(), second.Leader())
	fmt.Println("limit:", first.Capacity(), second.Capacity())
	// Output:
	// leader: true false
	// limit: 4 4
}

// A limit controller over a fleet's budget: Controller.Do takes the
// fleet's permits through AsBudget and reports each call's outcome; a
// refusal (a 429) lowers the fleet's limit at once, written to Redis by
// this instance, the fleet's leader.
func ExampleAsBudget() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	fleet, err := redislane.NewFleet(client, "example-adaptive-fleet", 4, redislane.WithLease(2*time.Second),
		redislane.WithQuarantine(0), redislane.WithLimitRefresh(200*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer fleet.Close()
	ctl, err := adaptive.New(redislane.AsBudget(fleet), 1, 64) // a candidate from here
	if err != nil {
		panic(err)
	}
	for !fleet.Leader() {
		time.Sleep(10 * time.Millisecond)
	}

	callModel := func(context.Context) error {
		return fmt.Errorf("%w: HTTP 429 Too Many Requests", adaptive.ErrOverload)
	}
	fmt.Println("limit:", fleet.Capacity())
	_ = ctl.Do(context.Background(), 1, callModel)
	for fleet.Capacity() != 3 { // 4 * 0.9, written to Redis in the background
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("limit:", fleet.Capacity(), "after", ctl.Stats().LastReason)
	// Output:
	// limit: 4
	// limit: 3 after overload
}

// Fair share across a fleet: two replicas share one lane of capacity 1
// made WithFairShare, and a call's semaphore.Group names its tenant. The
// big tenant's three calls queued first; the small tenant's one, queued
// last on the other replica, is served second: the groups take turns,
// decided in Redis whichever replica got the call.
func ExampleWithFairShare() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	const name = "example-fair-agents"
	replica := func() *redislane.Weighted {
		w, err := redislane.NewWeighted(client, name, 1, redislane.WithFairShare(nil),
			redislane.WithLease(2*time.Second), redislane.WithQuarantine(0))
		if err != nil {
			panic(err)
		}
		return w
	}
	a, b := replica(), replica()
	defer a.Close()
	defer b.Close()

	ctx := context.Background()
	busy, err := a.Acquire(ctx, 1) // the lane is busy while the calls queue
	if err != nil {
		panic(err)
	}
	queued := func() int64 { return client.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() }
	var wg sync.WaitGroup
	order := []struct {
		w      *redislane.Weighted
		tenant string
	}{{a, "big"}, {a, "big"}, {a, "big"}, {b, "small"}}
	for i, c := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.w.Acquire(ctx, 1, semaphore.Group(c.tenant))
			if err != nil {
				panic(err)
			}
			fmt.Println("served:", c.tenant)
			p.Release()
		}()
		for queued() < int64(i+1) { // wait until it is in line in Redis
			time.Sleep(time.Millisecond)
		}
	}
	busy.Release()
	wg.Wait()
	// Output:
	// served: big
	// served: small
	// served: big
	// served: big
}
