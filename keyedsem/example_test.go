package keyedsem_test

import (
	"context"
	"fmt"

	"github.com/sessionlane/lanes/keyedsem"
)

// session identifies a conversation of a chat gateway: the messages of one
// thread must be answered one at a time and in order, and different
// threads must not wait for each other.
type session struct {
	Channel, ChannelID, Sender, Thread string
}

// A gateway answers one message per thread at a time. Alice's thread is
// busy, so her second message waits; Bob's thread shares nothing with hers
// and is answered at once. With idle timeout 0 an entry goes as soon as its
// thread is quiet.
func Example_gateway() {
	ctx := context.Background()
	threads := keyedsem.New[session](keyedsem.WithIdleTimeout(0))
	defer threads.Close()
	alice := session{"slack", "C1000", "U2000", "thread_3000"}
	bob := session{"slack", "C1000", "U2001", "thread_3001"}

	first, err := threads.Acquire(ctx, alice) // answering Alice's first message
	if err != nil {
		panic(err)
	}
	answered := make(chan string)
	go func() {
		err := threads.Do(ctx, alice, func(context.Context) error { return nil })
		answered <- fmt.Sprintf("alice: second message answered (err %v)", err)
	}()

	_, free := threads.TryAcquire(alice)
	fmt.Println("alice's thread free:", free)
	err = threads.Do(ctx, bob, func(context.Context) error {
		fmt.Println("bob: answered while alice's thread is busy")
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("alice: first message answered")
	first.Release()
	fmt.Println(<-answered)
	fmt.Println("threads with an entry:", threads.Len())
	// Output:
	// alice's thread free: false
	// bob: answered while alice's thread is busy
	// alice: first message answered
	// alice: second message answered (err <nil>)
	// threads with an entry: 0
}

// String keys, with two jobs at a time per tenant: a third job of a busy
// tenant does not start, another tenant's does.
func Example_tenants() {
	ctx := context.Background()
	tenants := keyedsem.New[string](keyedsem.WithPerKeyCapacity(2))
	defer tenants.Close()

	job1, _ := tenants.Acquire(ctx, "tenant:acme")
	job2, _ := tenants.Acquire(ctx, "tenant:acme")
	_, ok := tenants.TryAcquire("tenant:acme")
	fmt.Println("third acme job starts:", ok)
	other, ok := tenants.TryAcquire("tenant:globex")
	fmt.Println("globex job starts:", ok)

	st := tenants.Stats()
	fmt.Printf("keys %d, held %d, per-key capacity %d\n", st.Keys, st.Held, st.Capacity)

	job1.Release()
	job2.Release()
	other.Release()
	fmt.Println("second release of a job:", job1.Release())
	st = tenants.Stats()
	fmt.Printf("held %d, idle keys kept %d, double releases %d\n", st.Held, st.Keys, st.DoubleReleases)
	// Output:
	// third acme job starts: false
	// globex job starts: true
	// keys 2, held 3, per-key capacity 2
	// second release of a job: false
	// held 0, idle keys kept 2, double releases 1
}

// Do holds the key for exactly as long as the work runs, and gives it back
// also when the work fails.
func ExampleKeyed_Do() {
	ctx := context.Background()
	jobs := keyedsem.New[int]()
	defer jobs.Close()

	err := jobs.Do(ctx, 42, func(context.Context) error {
		_, free := jobs.TryAcquire(42)
		fmt.Println("job 42 free while it runs:", free)
		return fmt.Errorf("job 42 failed")
	})
	fmt.Println(err)
	p, free := jobs.TryAcquire(42)
	fmt.Println("job 42 free afterwards:", free)
	p.Release()
	// Output:
	// job 42 free while it runs: false
	// job 42 failed
	// job 42 free afterwards: true
}
