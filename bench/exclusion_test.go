package bench_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/keyedsem"
)

// oracle counts the holders of each key. enter fails if the caller is not
// the only holder: the lock under test let two callers of one key in.
type oracle struct {
	holders []atomic.Int32
	worst   atomic.Int32
}

func newOracle(keys int) *oracle { return &oracle{holders: make([]atomic.Int32, keys)} }

func (o *oracle) enter(k int) error {
	n := o.holders[k].Add(1)
	for {
		w := o.worst.Load()
		if n <= w || o.worst.CompareAndSwap(w, n) {
			break
		}
	}
	if n > 1 {
		return fmt.Errorf("key %d: %d holders at once", k, n)
	}
	return nil
}

func (o *oracle) leave(k int) { o.holders[k].Add(-1) }

// checkExclusion runs goroutines × rounds Lock/Unlock of few keys on l,
// yielding inside the critical section so that holders are descheduled
// while they hold, and returns the first overlap the oracle saw.
func checkExclusion(l keyedLock, goroutines, nkeys, rounds int) error {
	ks := keys(nkeys)
	o := newOracle(nkeys)
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				k := (g + i) % nkeys
				h := l.Lock(ks[k])
				if err := o.enter(k); err != nil {
					first.CompareAndSwap(nil, &err)
				}
				runtime.Gosched()
				o.leave(k)
				l.Unlock(ks[k], h)
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// TestKeyedPeersExclude checks that every keyed peer the benchmarks measure
// lets at most one caller hold a key at a time, so that no peer wins by
// being wrong. lanes also runs with a cap of 2 keys and idle timeout 0, so
// that eviction and re-creation of entries race all the time.
func TestKeyedPeersExclude(t *testing.T) {
	peers := append([]keyedPeer{
		peerGlobal, peerLanes, peerQueue, lanesDefault,
		{"lanes-idle0-maxkeys2", newLanes(keyedsem.WithIdleTimeout(0), keyedsem.WithMaxKeys(2))},
		{"lanes-queue-idle0-maxkeys2", func() keyedLock {
			return newLanesQueue(newQueue(3, keyedsem.WithIdleTimeout(0), keyedsem.WithMaxKeys(2)), "global", "session")
		}},
	}, keyedPeers...)
	rounds := 400
	if testing.Short() {
		rounds = 50
	}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			if err := checkExclusion(p.make(), 16, 4, rounds); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// noLock is a broken keyed lock: it lets everyone in.
type noLock struct{}

func (noLock) Lock(string) held    { return held{} }
func (noLock) Unlock(string, held) {}

// TestExclusionCheckCatchesBrokenPeer shows that the check above can fail:
// the oracle flags a second holder at once, and a lock that excludes
// nobody is caught by checkExclusion.
func TestExclusionCheckCatchesBrokenPeer(t *testing.T) {
	o := newOracle(1)
	if err := o.enter(0); err != nil {
		t.Fatalf("first holder flagged: %v", err)
	}
	if err := o.enter(0); err == nil {
		t.Fatal("oracle missed a second holder of one key")
	}
	if err := checkExclusion(noLock{}, 16, 4, 400); err == nil {
		t.Fatal("checkExclusion passed a lock that excludes nobody")
	}
}
