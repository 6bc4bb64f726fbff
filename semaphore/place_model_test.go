package semaphore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// weightedPlaceModel is the sequential model of places on a semaphore:
// the permits available and the line of places not yet granted, in the
// order of service: FIFO, or with priorities by key (arrival minus
// priority times the step, equal keys oldest first). The head is served
// while it fits, so a heavy head is not overtaken; a newcomer that goes
// ahead of it is served at once if it fits.
type weightedPlaceModel struct {
	avail int64
	prio  bool
	line  []*weightedModelPlace
}

type weightedModelPlace struct {
	n       int64
	key     int64
	granted bool
	pl      semaphore.Place
}

func (m *weightedPlaceModel) join(p *weightedModelPlace) {
	i := len(m.line)
	for m.prio && i > 0 && m.line[i-1].key > p.key {
		i--
	}
	m.line = slices.Insert(m.line, i, p)
	m.serve()
}

func (m *weightedPlaceModel) serve() {
	for len(m.line) > 0 && m.line[0].n <= m.avail {
		m.avail -= m.line[0].n
		m.line[0].granted = true
		m.line = m.line[1:]
	}
}

// leave takes p out of the line, or gives its grant back.
func (m *weightedPlaceModel) leave(p *weightedModelPlace) {
	if p.granted {
		m.avail += p.n
	} else if i := slices.Index(m.line, p); i >= 0 {
		m.line = slices.Delete(m.line, i, i+1)
	}
	m.serve()
}

// TestWeightedPlaceMatchesModel runs random sequences of Join or JoinTurn
// (at priorities in [-2, 2] on a semaphore made WithPriorities(1s), its
// fake clock moved by whole seconds between them), Wait of places the
// model says are granted, Wait with an ended context, Leave, Release and
// TryAcquire against the model, and checks after every step that the
// permits held and the places waiting are the model's, that a place the
// model says is granted is granted (its Wait returns at once) and that
// every try answers as the model does.
func TestWeightedPlaceMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.Int64Range(1, 3).Draw(t, "capacity")
		prio := rapid.Bool().Draw(t, "priorities")
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		opts := []semaphore.Option{semaphore.WithClock(clk)}
		if prio {
			opts = append(opts, semaphore.WithPriorities(time.Second))
		}
		s := semaphore.New(capacity, opts...)
		defer s.Close()
		m := &weightedPlaceModel{avail: capacity, prio: prio}
		var now int64 // the fake clock since New, in ns
		var places []*weightedModelPlace
		var permits []semaphore.Permit
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		live, stop := context.WithTimeout(context.Background(), testkit.Deadline)
		defer stop()
		pick := func(n int, label string) int { return rapid.IntRange(0, n-1).Draw(t, label) }
		drop := func(i int) { places = slices.Delete(places, i, i+1) }

		t.Repeat(map[string]func(*rapid.T){
			"join": func(t *rapid.T) {
				n := rapid.Int64Range(1, capacity).Draw(t, "n")
				p := &weightedModelPlace{n: n, key: now}
				var err error
				if prio {
					pr := rapid.IntRange(-2, 2).Draw(t, "priority")
					p.key = now - int64(pr)*int64(time.Second)
					p.pl, err = s.Join(n, semaphore.Priority(pr))
				} else {
					p.pl, err = s.Join(n)
				}
				if err != nil {
					t.Fatalf("Join(%d): %v", n, err)
				}
				m.join(p)
				places = append(places, p)
			},
			"advance": func(t *rapid.T) {
				d := time.Duration(rapid.IntRange(1, 3).Draw(t, "seconds")) * time.Second
				clk.Advance(d)
				now += int64(d)
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
				permits = append(permits, perm)
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
				n := permits[i].Weight()
				if !permits[i].Release() {
					t.Fatal("Release of a held permit returned false")
				}
				permits = slices.Delete(permits, i, i+1)
				m.avail += n
				m.serve()
			},
			"try": func(t *rapid.T) {
				n := rapid.Int64Range(1, capacity).Draw(t, "n")
				want := len(m.line) == 0 && m.avail >= n
				p, ok := s.TryAcquire(n)
				if ok != want {
					t.Fatalf("TryAcquire(%d) = %v; the model says %v", n, ok, want)
				}
				if ok {
					m.avail -= n
					permits = append(permits, p)
				}
			},
			"": func(t *rapid.T) {
				var total int64
				for _, p := range permits {
					total += p.Weight()
				}
				for _, p := range places {
					if p.granted {
						total += p.n
					}
				}
				st := s.Stats()
				if held := capacity - m.avail; st.Held != held || held != total || st.Waiters != len(m.line) {
					t.Fatalf("held %d, waiters %d; the model holds %d (permits and granted places %d) with %d waiting", st.Held, st.Waiters, held, total, len(m.line))
				}
			},
		})
		for _, p := range places {
			p.pl.Leave()
		}
		for _, p := range permits {
			p.Release()
		}
		if st := s.Stats(); st.Held != 0 || st.Waiters != 0 {
			t.Fatalf("after leaving and releasing everything: held %d, waiters %d", st.Held, st.Waiters)
		}
	})
}
