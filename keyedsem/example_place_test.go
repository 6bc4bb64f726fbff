package keyedsem_test

import (
	"context"
	"fmt"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// A webhook takes its message's place in the thread's line and answers at
// once; the work is done later, by a worker that waits for the place. The
// thread's messages are worked on in the order they were joined, whatever
// order their workers start in (here the reverse).
func ExampleKeyed_Join() {
	threads := keyedsem.New[string]()
	defer threads.Close()

	msgs := []string{"hello", "what's the weather?", "thanks"}
	places := make([]semaphore.Place, len(msgs))
	for i, msg := range msgs {
		pl, err := threads.Join("slack:thread_3000")
		if err != nil {
			panic(err)
		}
		places[i] = pl
		fmt.Printf("accepted %q\n", msg) // the webhook's answer, at once
	}

	done := make(chan struct{})
	for i := len(places) - 1; i >= 0; i-- {
		go func() { // the worker owns places[i]
			defer func() { done <- struct{}{} }()
			p, err := places[i].Wait(context.Background())
			if err != nil {
				fmt.Println(err)
				return
			}
			defer p.Release()
			fmt.Printf("answered %q\n", msgs[i])
		}()
	}
	for range places {
		<-done
	}
	// Output:
	// accepted "hello"
	// accepted "what's the weather?"
	// accepted "thanks"
	// answered "hello"
	// answered "what's the weather?"
	// answered "thanks"
}
