package bench_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/locker"
	"github.com/puzpuzpuz/xsync/v4"
	xsem "golang.org/x/sync/semaphore"
	"k8s.io/utils/keymutex"

	"github.com/sessionlane/lanes/harness/benchkit"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// held is what a keyed peer hands back from Lock for its Unlock: a lanes
// permit or ticket, or nothing.
type held struct {
	p semaphore.Permit
	t *lanequeue.Ticket[string]
}

// keyedLock is one per-key lock: Lock(key) blocks until the caller holds
// key (capacity 1 per key); Unlock gives it back.
type keyedLock interface {
	Lock(key string) held
	Unlock(key string, h held)
}

// keyedPeer makes a fresh keyedLock, and says how to sweep and close it
// (nil when the peer has no such thing).
type keyedPeer struct {
	name string
	make func() keyedLock
}

var bg = context.Background()

// lanesKeyed is keyedsem behind the keyedLock interface.
type lanesKeyed struct {
	s *keyedsem.Keyed[string]
}

func (l lanesKeyed) Lock(key string) held {
	p, err := l.s.Acquire(bg, key)
	if err != nil {
		panic(err)
	}
	return held{p: p}
}

func (lanesKeyed) Unlock(_ string, h held) { h.p.Release() }

func newLanes(opts ...keyedsem.Option) func() keyedLock {
	return func() keyedLock { return lanesKeyed{keyedsem.New[string](opts...)} }
}

// lanesQueue is a lanequeue with a keyed lane and a global lane that
// never binds (capacity 1024): AcquireAll of both, then Release, with the
// set of lanes prepared once.
type lanesQueue struct {
	q     *lanequeue.Queue[string]
	lanes lanequeue.LaneSet[string]
}

// newLanesQueue returns a lanesQueue of q that takes the lanes named.
func newLanesQueue(q *lanequeue.Queue[string], names ...string) lanesQueue {
	ls, err := q.Lanes(names...)
	if err != nil {
		panic(err)
	}
	return lanesQueue{q, ls}
}

func newQueue(global int64, opts ...keyedsem.Option) *lanequeue.Queue[string] {
	q := lanequeue.New[string]()
	if err := q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string](opts...))); err != nil {
		panic(err)
	}
	if err := q.Add("global", lanequeue.NewGlobalLane[string](semaphore.New(global))); err != nil {
		panic(err)
	}
	return q
}

func (l lanesQueue) Lock(key string) held {
	t, err := l.q.AcquireAll(bg, key, l.lanes)
	if err != nil {
		panic(err)
	}
	return held{t: t}
}

func (lanesQueue) Unlock(_ string, h held) { h.t.Release() }

// globalLane is the serialising design the project exists to replace: one
// semaphore of capacity 1 for every key.
type globalLane struct{ s *semaphore.Weighted }

func (g globalLane) Lock(string) held {
	p, err := g.s.Acquire(bg, 1)
	if err != nil {
		panic(err)
	}
	return held{p: p}
}

func (globalLane) Unlock(_ string, h held) { h.p.Release() }

// mobyLocker is github.com/moby/locker: a mutex-guarded map of
// reference-counted mutexes, deleted at zero. sync.Mutex lets a newcomer
// overtake a waiter, so it is not FIFO.
type mobyLocker struct{ l *locker.Locker }

func (m mobyLocker) Lock(key string) held { m.l.Lock(key); return held{} }

func (m mobyLocker) Unlock(key string, _ held) {
	if err := m.l.Unlock(key); err != nil {
		panic(err)
	}
}

// hashedMutex is k8s.io/utils/keymutex: a fixed array of mutexes indexed by
// a hash of the key. Bounded memory, but unrelated keys that share a stripe
// wait for each other.
type hashedMutex struct{ k keymutex.KeyMutex }

func (h hashedMutex) Lock(key string) held { h.k.LockKey(key); return held{} }

func (h hashedMutex) Unlock(key string, _ held) {
	if err := h.k.UnlockKey(key); err != nil {
		panic(err)
	}
}

// refMap is the hand-rolled per-key mutex: a mutex-guarded
// map[string]*refEntry with reference counts, an entry deleted when its
// count drops to zero.
type refMap struct {
	mu sync.Mutex // protects m and every entry's refs
	m  map[string]*refEntry
}

type refEntry struct {
	mu   sync.Mutex
	refs int
}

func (r *refMap) Lock(key string) held {
	r.mu.Lock()
	e := r.m[key]
	if e == nil {
		e = &refEntry{}
		r.m[key] = e
	}
	e.refs++
	r.mu.Unlock()
	e.mu.Lock()
	return held{}
}

func (r *refMap) Unlock(key string, _ held) {
	r.mu.Lock()
	e := r.m[key]
	e.refs--
	if e.refs == 0 {
		delete(r.m, key)
	}
	e.mu.Unlock()
	r.mu.Unlock()
}

// semMap is the straight port of a per-key lane: a mutex-guarded
// map[string]*semaphore.Weighted (x/sync, FIFO) whose entries are never
// evicted.
type semMap struct {
	mu sync.Mutex // protects m
	m  map[string]*xsem.Weighted
}

func (s *semMap) get(key string) *xsem.Weighted {
	s.mu.Lock()
	w := s.m[key]
	if w == nil {
		w = xsem.NewWeighted(1)
		s.m[key] = w
	}
	s.mu.Unlock()
	return w
}

func (s *semMap) Lock(key string) held {
	if err := s.get(key).Acquire(bg, 1); err != nil {
		panic(err)
	}
	return held{}
}

func (s *semMap) Unlock(key string, _ held) { s.get(key).Release(1) }

const hour = time.Hour

// Lanes configurations:
//   - lanes-idle1h: entries kept for an idle hour, no practical cap on keys
//     (so every idle key stays: its cost per key shows);
//   - lanes-idle0: an entry dropped as soon as it is unreferenced;
//   - lanes-default: the defaults (idle hour, soft cap of 4096 keys).
var (
	lanesIdle1h  = keyedPeer{"lanes-idle1h", newLanes(keyedsem.WithIdleTimeout(hour), keyedsem.WithMaxKeys(1<<22))}
	lanesIdle0   = keyedPeer{"lanes-idle0", newLanes(keyedsem.WithIdleTimeout(0))}
	lanesDefault = keyedPeer{"lanes-default", newLanes()}
	peerLocker   = keyedPeer{"locker", func() keyedLock { return mobyLocker{locker.New()} }}
	peerKMNCPU   = keyedPeer{"keymutex-ncpu", func() keyedLock { return hashedMutex{keymutex.NewHashed(runtime.NumCPU())} }}
	peerKM1024   = keyedPeer{"keymutex-1024", func() keyedLock { return hashedMutex{keymutex.NewHashed(1024)} }}
	peerRefMap   = keyedPeer{"refmap", func() keyedLock { return &refMap{m: make(map[string]*refEntry)} }}
	peerSemMap   = keyedPeer{"semmap", func() keyedLock { return &semMap{m: make(map[string]*xsem.Weighted)} }}
)

// keyedPeers are the peers of the throughput scenarios.
var keyedPeers = []keyedPeer{lanesIdle1h, lanesIdle0, peerLocker, peerKMNCPU, peerKM1024, peerRefMap, peerSemMap}

// newKeyBuf returns a buffer holding keyPrefix with room for any number
// after it, so that building a key costs one allocation (the string) and
// no growth of the buffer: the baseline that "net of building the key"
// subtracts stays small and steady.
func newKeyBuf() []byte { return append(make([]byte, 0, 64), keyPrefix...) }

// keyPrefix is the shape of a gateway's session key: channel, channel id,
// sender, thread.
const keyPrefix = "gateway:slack:C1000:U2000:thread_"

func key(i int) string { return keyPrefix + strconv.Itoa(3000+i) }

func keys(n int) []string {
	k := make([]string, n)
	for i := range k {
		k[i] = key(i)
	}
	return k
}

// keysPerGoroutine is how many distinct keys each goroutine of the
// distinct-keys scenario cycles through (2048 keys in all with 32
// goroutines: below lanes' default cap of 4096, so entries are kept).
const keysPerGoroutine = 64

// BenchmarkKeyed measures one Lock+Unlock (empty critical section) per op:
//
//   - scenario=distinct-g32: 32 goroutines, each cycling through its own
//     64 keys: no two goroutines share a key;
//   - scenario=hot-g32: 32 goroutines on one key;
//   - scenario=hot-g1 (locker and lanes-barging only): one goroutine on
//     one key, nobody waits: the floor of the hot-g32 barging comparison
//     (locker then allocates its per-key record on every Lock);
//   - scenario=newkey: one goroutine, a key never seen before every
//     operation. Building the key costs one allocation and is inside the
//     loop; impl=baseline-keybuild measures building the key alone, so the
//     net cost of a peer is its figure minus the baseline's. The impls
//     lanes-idle0-struct and lanes-default-struct use a struct key, which
//     needs no building and no allocation.
//   - scenario=burst-N: one goroutine takes N distinct keys and holds them
//     all, then releases them all, and again; one op is one key taken and
//     released. With N above lanes' soft cap on keys (4096 by default),
//     every entry is busy, none can be evicted, and the cost of a new key
//     shows whether the cap handling scales.
func BenchmarkKeyed(b *testing.B) {
	for _, p := range keyedPeers {
		b.Run("scenario=distinct-g32/impl="+p.name, func(b *testing.B) {
			all := keys(keysPerGoroutine * benchkit.SetGoroutines(b, 32))
			l := p.make()
			var next sync.Mutex
			id := 0
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				next.Lock()
				mine := all[id*keysPerGoroutine : (id+1)*keysPerGoroutine]
				id++
				next.Unlock()
				i := 0
				for pb.Next() {
					k := mine[i%keysPerGoroutine]
					l.Unlock(k, l.Lock(k))
					i++
				}
			})
		})
	}
	for _, p := range keyedPeers {
		b.Run("scenario=hot-g32/impl="+p.name, func(b *testing.B) {
			benchkit.SetGoroutines(b, 32)
			k := key(0)
			l := p.make()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Unlock(k, l.Lock(k))
				}
			})
		})
	}
	b.Run("scenario=hot-g32/impl="+bargingImpl, runKeyedBarging)
	b.Run("scenario=hot-g32/impl=locker-probed", func(b *testing.B) { runKeyedProbed(b, peerLocker.make()) })
	b.Run("scenario=hot-g1/impl=locker", func(b *testing.B) { runKeyedFloor(b, peerLocker.make()) })
	b.Run("scenario=hot-g1/impl="+bargingImpl, func(b *testing.B) {
		runKeyedFloor(b, lanesKeyed{keyedsem.New[string](keyedsem.WithBarging(bargingBound))})
	})
	b.Run("scenario=newkey/impl=baseline-keybuild", func(b *testing.B) {
		b.ReportAllocs()
		buf := newKeyBuf()
		for i := 0; i < b.N; i++ {
			sinkKey = string(strconv.AppendInt(buf[:len(keyPrefix)], int64(i), 10))
		}
	})
	for _, p := range []keyedPeer{lanesIdle0, lanesDefault, peerLocker, peerKMNCPU, peerKM1024, peerRefMap, peerSemMap} {
		b.Run("scenario=newkey/impl="+p.name, func(b *testing.B) {
			l := p.make()
			buf := newKeyBuf()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := string(strconv.AppendInt(buf[:len(keyPrefix)], int64(i), 10))
				l.Unlock(k, l.Lock(k))
			}
		})
	}
	// impl=floor-xsync is no lock: it stores a new key in an xsync map
	// and deletes it, the two map operations that a keyed semaphore on
	// xsync (as the design asks) cannot avoid for a key it has never seen
	// and drops on release. Its net figure is the floor of lanes-idle0's.
	b.Run("scenario=newkey/impl=floor-xsync", func(b *testing.B) {
		m := xsync.NewMap[string, *int]()
		v := new(int)
		buf := newKeyBuf()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			k := string(strconv.AppendInt(buf[:len(keyPrefix)], int64(i), 10))
			m.LoadOrStore(k, v)
			m.Delete(k)
		}
	})
	// scenario=newkey-g32: 32 goroutines, each making a key never seen
	// before on every operation (sub-agents with unique ids in a busy
	// gateway); baseline-keybuild-g32 builds the keys alone.
	newKeyG32 := func(b *testing.B, lockUnlock func(k string)) {
		benchkit.SetGoroutines(b, 32)
		var ids atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			buf := strconv.AppendInt(newKeyBuf(), ids.Add(1), 10)
			buf = append(buf, ':')
			n := len(buf)
			for i := int64(0); pb.Next(); i++ {
				lockUnlock(string(strconv.AppendInt(buf[:n], i, 10)))
			}
		})
	}
	b.Run("scenario=newkey-g32/impl=baseline-keybuild", func(b *testing.B) {
		newKeyG32(b, func(k string) { runtime.KeepAlive(k) })
	})
	for _, p := range []keyedPeer{lanesIdle0, lanesDefault, peerLocker, peerKM1024, peerRefMap, peerSemMap} {
		b.Run("scenario=newkey-g32/impl="+p.name, func(b *testing.B) {
			l := p.make()
			newKeyG32(b, func(k string) { l.Unlock(k, l.Lock(k)) })
		})
	}
	for _, n := range []int{2048, 16384} {
		for _, p := range []keyedPeer{lanesDefault, lanesIdle0, peerLocker, peerRefMap, peerSemMap} {
			b.Run(fmt.Sprintf("scenario=burst-%d/impl=%s", n, p.name), func(b *testing.B) {
				ks := keys(n)
				hs := make([]held, n)
				l := p.make()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					j := i % n
					hs[j] = l.Lock(ks[j])
					if j == n-1 || i == b.N-1 {
						for k := 0; k <= j; k++ {
							l.Unlock(ks[k], hs[k])
						}
					}
				}
			})
		}
	}
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
	}{{"lanes-idle0-struct", []keyedsem.Option{keyedsem.WithIdleTimeout(0)}}, {"lanes-default-struct", nil}} {
		b.Run("scenario=newkey/impl="+c.name, func(b *testing.B) {
			s := keyedsem.New[sessionKey](c.opts...)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p, err := s.Acquire(bg, sessionKey{"slack", "C1000", "U2000", i})
				if err != nil {
					b.Fatal(err)
				}
				p.Release()
			}
		})
	}
}

// sessionKey is a typed key: comparable, built without allocating.
type sessionKey struct {
	Channel, ChannelID, Sender string
	Thread                     int
}

var sinkKey string

// memKeys is the number of keys of the memory scenarios.
const memKeys = 100_000

// memPeer is a peer of the memory scenarios: after fills the structure,
// settle (if set) runs after the burst is released (a Sweep, after moving
// a fake clock past the idle timeout).
type memPeer struct {
	name   string
	make   func() keyedLock
	settle func(l keyedLock)
	burst  bool // can hold memKeys distinct keys at once from one goroutine
}

func lanesMem(name string, fake *clock.Fake, opts ...keyedsem.Option) memPeer {
	burst := name != "lanes-default"
	return memPeer{
		name: name,
		make: func() keyedLock {
			return lanesKeyed{keyedsem.New[string](append(opts, keyedsem.WithClock(fake))...)}
		},
		settle: func(l keyedLock) {
			fake.Advance(2 * hour)
			l.(lanesKeyed).s.Sweep()
		},
		burst: burst,
	}
}

// heapInUse returns the live heap after two collections (the second one
// empties the sync.Pool victim caches).
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkKeyedMemory reports B/key, the heap a structure retains per key
// once the work is over (one op = the whole scenario, so ns/op is the time
// of 100k keys):
//
//   - scenario=idle-100k: 100k distinct keys, each locked and unlocked once,
//     one after the other. The keys are built inside the measured region
//     and dropped by the benchmark, so a structure that keeps a key pays
//     for it (about 48 B of the figure).
//   - scenario=burst-100k: 100k distinct keys held at once, then all
//     released (and, for lanes, the fake clock moved past the idle timeout
//     and Sweep called). B/key is what stays per peak key: Go maps do not
//     shrink, lanes' xsync maps do. keymutex cannot take part: one
//     goroutine holding 100k keys in 1024 stripes deadlocks on itself.
func BenchmarkKeyedMemory(b *testing.B) {
	// The lanes configurations here have no practical cap on keys: with
	// the default soft cap of 4096, 100k keys held at once would make every
	// new key run an eviction pass over the whole map (see scenario=burst-N
	// of BenchmarkKeyed). lanes-default, with the cap, takes part in the
	// idle scenario, where the cap evicts.
	const noCap = 1 << 22
	peers := func() []memPeer {
		return []memPeer{
			lanesMem("lanes-idle0", clock.NewFake(time.Unix(0, 0)), keyedsem.WithIdleTimeout(0), keyedsem.WithMaxKeys(noCap)),
			lanesMem("lanes-idle1h", clock.NewFake(time.Unix(0, 0)), keyedsem.WithIdleTimeout(hour), keyedsem.WithMaxKeys(noCap)),
			lanesMem("lanes-default", clock.NewFake(time.Unix(0, 0))),
			{name: "locker", make: peerLocker.make, burst: true},
			{name: "keymutex-ncpu", make: peerKMNCPU.make},
			{name: "keymutex-1024", make: peerKM1024.make},
			{name: "refmap", make: peerRefMap.make, burst: true},
			{name: "semmap", make: peerSemMap.make, burst: true},
		}
	}
	for _, p := range peers() {
		b.Run("scenario=idle-100k/impl="+p.name, func(b *testing.B) {
			var total int64
			for i := 0; i < b.N; i++ {
				before := heapInUse()
				l := p.make()
				buf := newKeyBuf()
				for j := 0; j < memKeys; j++ {
					k := string(strconv.AppendInt(buf[:len(keyPrefix)], int64(i*memKeys+j), 10))
					l.Unlock(k, l.Lock(k))
				}
				total += heapInUse() - before
				runtime.KeepAlive(l)
			}
			b.ReportMetric(float64(total)/float64(b.N)/memKeys, "B/key")
		})
	}
	for _, p := range peers() {
		if !p.burst {
			continue
		}
		b.Run("scenario=burst-100k/impl="+p.name, func(b *testing.B) {
			var total int64
			hs := make([]held, memKeys)
			ks := make([]string, memKeys)
			for i := 0; i < b.N; i++ {
				before := heapInUse()
				l := p.make()
				buf := newKeyBuf()
				for j := range ks {
					ks[j] = string(strconv.AppendInt(buf[:len(keyPrefix)], int64(i*memKeys+j), 10))
					hs[j] = l.Lock(ks[j])
				}
				for j := range ks {
					l.Unlock(ks[j], hs[j])
				}
				clear(ks)
				clear(hs)
				if p.settle != nil {
					p.settle(l)
				}
				total += heapInUse() - before
				runtime.KeepAlive(l)
			}
			b.ReportMetric(float64(total)/float64(b.N)/memKeys, "B/key")
		})
	}
}
