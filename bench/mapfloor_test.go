package bench_test

import (
	"hash/maphash"
	"strconv"
	"sync"
	"testing"

	"github.com/puzpuzpuz/xsync/v4"

	"github.com/sessionlane/lanes/harness/benchkit"
)

// stripedMap is the map that issue 27's new-key rows were weighed against:
// 64 stripes, each a mutex over a built-in map, the stripe picked by a
// hash of the key. It is not a peer and no lane uses it: it is here so
// that the trade it makes against xsync (keyedsem's map, as the design
// names it) can be measured rather than argued.
type stripedMap struct {
	seed    maphash.Seed
	stripes [64]mapStripe
}

type mapStripe struct {
	mu sync.Mutex
	m  map[string]*int
	_  [40]byte // a stripe to a cache line
}

func newStripedMap() *stripedMap {
	s := &stripedMap{seed: maphash.MakeSeed()}
	for i := range s.stripes {
		s.stripes[i].m = make(map[string]*int)
	}
	return s
}

func (s *stripedMap) stripe(k string) *mapStripe {
	return &s.stripes[maphash.String(s.seed, k)%uint64(len(s.stripes))]
}

func (s *stripedMap) loadOrStore(k string, v *int) *int {
	st := s.stripe(k)
	st.mu.Lock()
	cur, ok := st.m[k]
	if !ok {
		st.m[k], cur = v, v
	}
	st.mu.Unlock()
	return cur
}

func (s *stripedMap) load(k string) *int {
	st := s.stripe(k)
	st.mu.Lock()
	v := st.m[k]
	st.mu.Unlock()
	return v
}

func (s *stripedMap) delete(k string) {
	st := s.stripe(k)
	st.mu.Lock()
	delete(st.m, k)
	st.mu.Unlock()
}

// BenchmarkMapFloor weighs the two map operations a new key costs (an
// insert and a delete, as floor-xsync of BenchmarkKeyed) against the
// lookup a hot key costs (32 goroutines loading one key), on xsync and on
// a striped map of built-in maps:
//
//   - row=newkey: one goroutine, a new key every op, stored and deleted
//     (the key is built as BenchmarkKeyed builds it; subtract
//     newkey/impl=baseline-keybuild there for the net);
//   - row=hot-g32: 32 goroutines loading one key: xsync's load takes no
//     lock, the striped map's takes the stripe's.
//
// The striped map does a new key's work in about half of xsync's time,
// and a hot key's lookup in several times its time (docs/internals.md,
// "keyedsem: new keys, and a map of our own").
func BenchmarkMapFloor(b *testing.B) {
	v := new(int)
	b.Run("row=newkey/map=xsync", func(b *testing.B) {
		m := xsync.NewMap[string, *int]()
		buf := newKeyBuf()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			k := string(strconv.AppendInt(buf[:len(keyPrefix)], int64(i), 10))
			m.LoadOrStore(k, v)
			m.Delete(k)
		}
	})
	b.Run("row=newkey/map=striped", func(b *testing.B) {
		m := newStripedMap()
		buf := newKeyBuf()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			k := string(strconv.AppendInt(buf[:len(keyPrefix)], int64(i), 10))
			m.loadOrStore(k, v)
			m.delete(k)
		}
	})
	hot := key(0)
	b.Run("row=hot-g32/map=xsync", func(b *testing.B) {
		m := xsync.NewMap[string, *int]()
		m.Store(hot, v)
		benchkit.SetGoroutines(b, 32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if got, _ := m.Load(hot); got != v {
					panic("map lost the hot key")
				}
			}
		})
	})
	b.Run("row=hot-g32/map=striped", func(b *testing.B) {
		m := newStripedMap()
		m.loadOrStore(hot, v)
		benchkit.SetGoroutines(b, 32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if m.load(hot) != v {
					panic("map lost the hot key")
				}
			}
		})
	})
}
