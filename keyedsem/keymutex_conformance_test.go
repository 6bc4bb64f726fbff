package keyedsem_test

// The test suite of k8s.io/utils/keymutex, rewritten in this package's API:
// repository kubernetes/utils, file keymutex/keymutex_test.go (read at
// commit cf1189d6abe3). Each test names the original it ports.
//
// The API maps as follows (docs/compat.md has the reasons):
//
//	keymutex.NewHashed(n)   keyedsem.New[string](opts...): one lock per key, no hashing onto n shared locks
//	km.LockKey(id)          p, err := s.Acquire(ctx, id)
//	km.UnlockKey(id)        p.Release() (true once; false, not an error, when there is nothing to unlock)
//
// The original runs each test over NewHashed(0), (1), (2) and (4); these run
// over a set of our configurations instead (kmVariants). Its
// verifyCallbackDoesntHappens waits a full second to see that a Lock
// blocks; here the Lock is seen waiting in Stats, then checked not to have
// returned.

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// kmVariants plays the role of the original's newKeyMutexes: the same tests
// over several configurations of a keyed semaphore.
func kmVariants() map[string]*keyedsem.Keyed[string] {
	return map[string]*keyedsem.Keyed[string]{
		"default":           keyedsem.New[string](),
		"idle timeout 0":    keyedsem.New[string](keyedsem.WithIdleTimeout(0)),
		"max keys 1":        keyedsem.New[string](keyedsem.WithMaxKeys(1)),
		"hard max keys 4":   keyedsem.New[string](keyedsem.WithMaxKeys(4), keyedsem.WithHardMaxKeys()),
		"max waiters 1/key": keyedsem.New[string](keyedsem.WithMaxWaitersPerKey(1)),
	}
}

// kmLockAndCallback is the original's lockAndCallback: lock id, then
// signal (with the permit, which the original's UnlockKey does not need).
func kmLockAndCallback(t testing.TB, s *keyedsem.Keyed[string], id string, callback chan<- semaphore.Permit) {
	p, err := s.Acquire(context.Background(), id)
	if err != nil {
		t.Errorf("LockKey(%q): %v", id, err)
		close(callback)
		return
	}
	callback <- p
}

// kmCallbackHappens is verifyCallbackHappens, with a deadline.
func kmCallbackHappens(t testing.TB, callback <-chan semaphore.Permit) semaphore.Permit {
	t.Helper()
	select {
	case p, ok := <-callback:
		if !ok {
			t.Fatal("the lock failed")
		}
		return p
	case <-time.After(testkit.Deadline):
		t.Fatalf("Timed out waiting for callback.")
		return semaphore.Permit{}
	}
}

// kmCallbackDoesntHappen is verifyCallbackDoesntHappens without the
// one-second wait: once the locker is seen waiting in Stats (waiters total
// over all keys), it must not have returned.
func kmCallbackDoesntHappen(t testing.TB, s *keyedsem.Keyed[string], waiters int, callback <-chan semaphore.Permit) {
	t.Helper()
	testkit.Eventually(t, "the locker to wait", func() bool { return s.Stats().Waiters == waiters })
	select {
	case <-callback:
		t.Fatalf("Unexpected callback.")
	default:
	}
}

// TestConformanceKeymutexSingleLockNoUnlock ports Test_SingleLock_NoUnlock
// (kubernetes/utils, keymutex/keymutex_test.go): a first lock of a key
// succeeds at once. The original never unlocks; ours releases at the end
// only so that goleak and the next variant see a clean state.
func TestConformanceKeymutexSingleLockNoUnlock(t *testing.T) {
	t.Parallel()
	for name, s := range kmVariants() {
		t.Run(name, func(t *testing.T) {
			callback := make(chan semaphore.Permit, 1)
			go kmLockAndCallback(t, s, "fakeid", callback)
			p := kmCallbackHappens(t, callback)
			if st := s.Stats(); st.Held != 1 {
				t.Fatalf("Held = %d after one lock, want 1", st.Held)
			}
			p.Release()
		})
	}
}

// TestConformanceKeymutexSingleLockSingleUnlock ports
// Test_SingleLock_SingleUnlock (kubernetes/utils,
// keymutex/keymutex_test.go): lock, then unlock. UnlockKey returns an error
// in keymutex's interface ("if the specified ID doesn't exist"); our Release
// returns true for the unlock and false for anything after it.
func TestConformanceKeymutexSingleLockSingleUnlock(t *testing.T) {
	t.Parallel()
	for name, s := range kmVariants() {
		t.Run(name, func(t *testing.T) {
			callback := make(chan semaphore.Permit, 1)
			go kmLockAndCallback(t, s, "fakeid", callback)
			p := kmCallbackHappens(t, callback)
			if !p.Release() {
				t.Fatal("UnlockKey (Release) returned false")
			}
			if p.Release() {
				t.Fatal("a second UnlockKey (Release) returned true")
			}
			if st := s.Stats(); st.Held != 0 {
				t.Fatalf("Held = %d after unlock, want 0", st.Held)
			}
		})
	}
}

// TestConformanceKeymutexDoubleLockDoubleUnlock ports
// Test_DoubleLock_DoubleUnlock (kubernetes/utils,
// keymutex/keymutex_test.go): a second lock of a held key waits until the
// first unlock, then succeeds. One addition shows where we differ from
// NewHashed: there, keys that hash to the same one of n mutexes wait for
// each other (NewHashed(1): all of them); here a different key is never
// blocked by a held one.
func TestConformanceKeymutexDoubleLockDoubleUnlock(t *testing.T) {
	t.Parallel()
	for name, s := range kmVariants() {
		t.Run(name, func(t *testing.T) {
			first := make(chan semaphore.Permit, 1)
			second := make(chan semaphore.Permit, 1)
			go kmLockAndCallback(t, s, "fakeid", first)
			p1 := kmCallbackHappens(t, first)
			go kmLockAndCallback(t, s, "fakeid", second)
			kmCallbackDoesntHappen(t, s, 1, second)

			// Another key is not blocked by "fakeid" (NewHashed(1)'s would be).
			other := make(chan semaphore.Permit, 1)
			go kmLockAndCallback(t, s, "otherid", other)
			kmCallbackHappens(t, other).Release()

			p1.Release()
			p2 := kmCallbackHappens(t, second)
			p2.Release()
			if st := s.Stats(); st.Held != 0 || st.Waiters != 0 {
				t.Fatalf("after both unlocks: %+v", st)
			}
		})
	}
}
