package keyedsem_test

import (
	"context"
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// placeModel is the sequential model of places on a keyed semaphore: per
// key, the permits available and the line of places, FIFO (or, ordered,
// by ascending sequence, equal ones oldest first), the head served while
// it fits (a heavy head is not overtaken).
type placeModel struct {
	capacity int64
	ordered  bool // WithSequenceOrder: places join by JoinTurn's Sequence
	avail    map[int]int64
	line     map[int][]*modelPlace // places not yet granted, in the order of service
}

type modelPlace struct {
	key     int
	n       int64
	seq     int64 // ordered: the place's Turn.Sequence
	granted bool
	pl      semaphore.Place
}

type modelPermit struct {
	key int
	n   int64
	p   semaphore.Permit
}

// join puts p in its key's line, behind every place it does not go ahead
// of, and serves the key.
func (m *placeModel) join(p *modelPlace) {
	q := m.line[p.key]
	i := len(q)
	for m.ordered && i > 0 && q[i-1].seq > p.seq {
		i--
	}
	m.line[p.key] = append(q[:i:i], append([]*modelPlace{p}, q[i:]...)...)
	m.serve(p.key)
}

func (m *placeModel) serve(key int) {
	q := m.line[key]
	for len(q) > 0 && q[0].n <= m.avail[key] {
		m.avail[key] -= q[0].n
		q[0].granted = true
		q = q[1:]
	}
	m.line[key] = q
}

// leave takes p out of the line, or gives its grant back.
func (m *placeModel) leave(p *modelPlace) {
	if p.granted {
		m.avail[p.key] += p.n
	} else {
		q := m.line[p.key]
		for i := range q {
			if q[i] == p {
				m.line[p.key] = append(q[:i:i], q[i+1:]...)
				break
			}
		}
	}
	m.serve(p.key)
}

// TestPlaceMatchesModel runs random sequences of Join (JoinTurn with a
// sequence on a semaphore made WithSequenceOrder), Wait (of places
// the model says are granted, and with an ended context of any place),
// Leave, Release and TryAcquire on two keys against the model, and checks
// after every step that the permits held and the places waiting are the
// model's (and so available + held == capacity per key), that a place
// the model says is granted is granted (its Wait returns at once) and
// that every try answers as the model does.
func TestPlaceMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.Int64Range(1, 3).Draw(t, "capacity")
		ordered := rapid.Bool().Draw(t, "ordered")
		opts := []keyedsem.Option{keyedsem.WithPerKeyCapacity(capacity)}
		if ordered {
			opts = append(opts, keyedsem.WithSequenceOrder())
		}
		s := keyedsem.New[int](opts...)
		defer s.Close()
		m := &placeModel{capacity: capacity, ordered: ordered, avail: map[int]int64{0: capacity, 1: capacity}, line: map[int][]*modelPlace{}}
		var places []*modelPlace
		var permits []modelPermit
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		live, stop := context.WithTimeout(context.Background(), testkit.Deadline)
		defer stop()
		pick := func(n int, label string) int { return rapid.IntRange(0, n-1).Draw(t, label) }
		drop := func(i int) { places = append(places[:i], places[i+1:]...) }

		t.Repeat(map[string]func(*rapid.T){
			"join": func(t *rapid.T) {
				key := pick(2, "key")
				n := rapid.Int64Range(1, capacity).Draw(t, "n")
				p := &modelPlace{key: key, n: n}
				var err error
				if ordered {
					p.seq = rapid.Int64Range(0, 3).Draw(t, "seq")
					p.pl, err = s.Join(key, semaphore.Weight(n), semaphore.Sequence(p.seq))
				} else {
					p.pl, err = s.Join(key, semaphore.Weight(n))
				}
				if err != nil {
					t.Fatalf("Join(%d, %d) at sequence %d: %v", key, n, p.seq, err)
				}
				m.join(p)
				places = append(places, p)
			},
			"waitGranted": func(t *rapid.T) {
				var granted []int
				for i, p := range places {
					if p.granted {
						granted = append(granted, i)
					}
				}
				if len(granted) == 0 {
					t.Skip("no granted place")
				}
				i := granted[pick(len(granted), "place")]
				p := places[i]
				perm, err := p.pl.Wait(live)
				if err != nil || perm.Weight() != p.n {
					t.Fatalf("Wait of a granted place of %d: weight %d, %v", p.n, perm.Weight(), err)
				}
				drop(i)
				permits = append(permits, modelPermit{p.key, p.n, perm})
			},
			"waitEnded": func(t *rapid.T) {
				if len(places) == 0 {
					t.Skip("no place")
				}
				i := pick(len(places), "place")
				p := places[i]
				if _, err := p.pl.Wait(ended); !errors.Is(err, context.Canceled) {
					t.Fatalf("Wait with an ended context: %v; want context.Canceled", err)
				}
				drop(i)
				m.leave(p)
			},
			"leave": func(t *rapid.T) {
				if len(places) == 0 {
					t.Skip("no place")
				}
				i := pick(len(places), "place")
				p := places[i]
				p.pl.Leave()
				drop(i)
				m.leave(p)
			},
			"release": func(t *rapid.T) {
				if len(permits) == 0 {
					t.Skip("no permit")
				}
				i := pick(len(permits), "permit")
				r := permits[i]
				if !r.p.Release() {
					t.Fatal("Release of a held permit returned false")
				}
				permits = append(permits[:i], permits[i+1:]...)
				m.avail[r.key] += r.n
				m.serve(r.key)
			},
			"try": func(t *rapid.T) {
				key := pick(2, "key")
				n := rapid.Int64Range(1, capacity).Draw(t, "n")
				want := len(m.line[key]) == 0 && m.avail[key] >= n
				p, ok := s.TryAcquire(key, semaphore.Weight(n))
				if ok != want {
					t.Fatalf("TryAcquire(%d, %d) = %v; the model says %v", key, n, ok, want)
				}
				if ok {
					m.avail[key] -= n
					permits = append(permits, modelPermit{key, n, p})
				}
			},
			"": func(t *rapid.T) {
				var held, total int64
				waiting := 0
				for key := range 2 {
					held += capacity - m.avail[key]
					waiting += len(m.line[key])
				}
				for _, p := range permits {
					total += p.n
				}
				for _, p := range places {
					if p.granted {
						total += p.n
					}
				}
				st := s.Stats()
				if st.Held != held || held != total || st.Waiters != waiting {
					t.Fatalf("held %d, waiters %d; the model holds %d (permits and granted places %d) with %d waiting", st.Held, st.Waiters, held, total, waiting)
				}
			},
		})
		for _, p := range places {
			p.pl.Leave()
		}
		for _, p := range permits {
			p.p.Release()
		}
		if st := s.Stats(); st.Held != 0 || st.Waiters != 0 {
			t.Fatalf("after leaving and releasing everything: held %d, waiters %d", st.Held, st.Waiters)
		}
	})
}
