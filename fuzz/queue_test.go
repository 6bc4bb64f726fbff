package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
)

// Operations of FuzzQueue, chosen by an op byte modulo queueOps; each takes
// two argument bytes: the lanes named, and the key and weight.
const (
	queueTry         = iota // TryAcquireAll
	queueAcquire            // AcquireAll in a goroutine; it may wait (one waiter at a time)
	queueAcquireDone        // AcquireAll with a context already cancelled
	queueCancel             // cancel the waiter's context
	queueRelease            // release a ticket
	queueDouble             // release a released ticket again
	queueClose              // Close
	queueOps
)

var queueErr = map[model.QueueErr]error{
	model.QueueClosed:        lanequeue.ErrClosed,
	model.QueueNoLanes:       lanequeue.ErrNoLanes,
	model.QueueUnknownLane:   lanequeue.ErrUnknownLane,
	model.QueueDuplicateLane: lanequeue.ErrDuplicateLane,
	model.QueueInvalidWeight: lanequeue.ErrInvalidWeight,
	model.QueueTooHeavy:      lanequeue.ErrTooHeavy,
}

// negligibleRate is the refill rate of the rate lane: a token in 3 years,
// so that within a run the real limiter behaves like the model's, which
// never refills.
const negligibleRate = rate.Limit(1e-8)

type ticketed struct {
	t   *lanequeue.Ticket[string]
	err error
}

type queuePending struct {
	id     int
	cancel context.CancelFunc
	res    chan ticketed
}

type queueDriver struct {
	t        *testing.T
	q        *lanequeue.Queue[string]
	m        *model.Queue
	lanes    []model.QueueLane // canonical order
	maxCap   int64
	pending  *queuePending
	tickets  map[int]*lanequeue.Ticket[string] // by model id
	released map[int]*lanequeue.Ticket[string]
	relIDs   []int
	log      []string
}

// FuzzQueue drives a lanequeue.Queue[string] and model.Queue with the same
// operations: a session lane (keyed), a global lane, and optionally a
// second global lane and a rate lane, named in any order, with duplicate,
// unknown and missing names, weights out of range, and one caller at a
// time blocked part-way through AcquireAll. After every step it compares
// the outcome (ticket or error), what every lane holds, who waits where,
// and Holders with the model: so a ticket that holds some lanes and not
// others, a rollback that leaves a permit behind, or a lane taken out of
// canonical order, shows.
//
// Input: per-key capacity of "session" (1..2), capacity of "global"
// (1..3), a byte of options (bit 0: a "gpu" global lane of capacity 1..2;
// bit 2: a "rate" lane of burst 1..3), then groups of (op, lanes, key and
// weight).
func FuzzQueue(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog()()
		in := &input{b: data}
		lanes := []model.QueueLane{
			{Name: "session", Kind: model.QueueKeyed, Capacity: int64(1 + in.byte()%2)},
			{Name: "global", Kind: model.QueueGlobal, Capacity: int64(1 + in.byte()%3)},
		}
		o := in.byte()
		if o&1 != 0 {
			lanes = append(lanes, model.QueueLane{Name: "gpu", Kind: model.QueueGlobal, Capacity: int64(1 + o>>1%2)})
		}
		if o&4 != 0 {
			lanes = append(lanes, model.QueueLane{Name: "rate", Kind: model.QueueRate, Capacity: int64(1 + o>>3%3)})
		}
		q := lanequeue.New[string]()
		for _, l := range lanes {
			var err error
			switch l.Kind {
			case model.QueueKeyed:
				err = q.AddSessionLane(l.Name, keyedsem.WithPerKeyCapacity(l.Capacity), keyedsem.WithIdleTimeout(0))
			case model.QueueGlobal:
				err = q.AddLane(l.Name, l.Capacity)
			case model.QueueRate:
				err = q.AddRateLane(l.Name, negligibleRate, int(l.Capacity))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		m := model.NewQueue(lanes...)
		d := &queueDriver{t: t, q: q, m: m, lanes: m.Lanes(),
			tickets: map[int]*lanequeue.Ticket[string]{}, released: map[int]*lanequeue.Ticket[string]{}}
		for _, l := range lanes {
			d.maxCap = max(d.maxCap, l.Capacity)
		}
		d.logf("lanes %+v", d.lanes)
		if got, want := q.Names(), laneNames(d.lanes); !slices.Equal(got, want) {
			d.fatalf("Names() = %v, canonical order is %v", got, want)
		}
		d.check()
		for ops := 0; in.more() && ops < maxOps; ops++ {
			d.step(in.byte()%queueOps, in.byte(), in.byte())
			d.check()
		}
		d.finish()
		if testing.Verbose() {
			t.Logf("operations:\n  %s", joinLines(d.log))
		}
	})
}

func laneNames(ls []model.QueueLane) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Name
	}
	return out
}

func (d *queueDriver) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

func (d *queueDriver) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s\noperations:\n  %s", fmt.Sprintf(format, args...), joinLines(d.log))
}

// request decodes the lanes named (bit i: the lane of rank i, or an
// unknown name if there is no such lane; bit 4: the first name again;
// bit 5: in reverse order), the key ("k0".."k2") and the weight (0 to
// one above the largest capacity).
func (d *queueDriver) request(a, b byte) (names []string, key string, n int64) {
	all := []string{"session", "global", "gpu", "rate"}
	for i, name := range all {
		if a&(1<<i) == 0 {
			continue
		}
		if _, ok := d.q.Lane(name); !ok {
			name = "nope"
		}
		names = append(names, name)
	}
	if a&16 != 0 && len(names) > 0 {
		names = append(names, names[0])
	}
	if a&32 != 0 {
		slices.Reverse(names)
	}
	return names, fmt.Sprintf("k%d", b%3), int64(b/3) % (d.maxCap + 2)
}

func (d *queueDriver) step(op, a, b byte) {
	switch op {
	case queueTry:
		names, key, n := d.request(a, b)
		tk, ok := tryAcquireAll(d.q, key, names, lanequeue.WithWeight(n))
		id, want, werr := d.m.TryAcquire(key, names, n)
		d.logf("TryAcquireAll(%s, %v, %d) = %v (model %v %v, id %d)", key, names, n, ok, want, werr, id)
		if ok != want {
			d.fatalf("TryAcquireAll(%s, %v, %d) = %v, model says %v (%v)", key, names, n, ok, want, werr)
		}
		if ok {
			d.granted(id, tk)
		}
	case queueAcquire:
		if d.pending != nil {
			return
		}
		names, key, n := d.request(a, b)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan ticketed, 1)
		go func() {
			tk, err := acquireAll(d.q, ctx, key, names, lanequeue.WithWeight(n))
			res <- ticketed{tk, err}
		}()
		id, now, werr := d.m.Acquire(key, names, n)
		d.logf("AcquireAll(%s, %v, %d) -> id %d, granted %v, %v", key, names, n, id, now, werr)
		if now || werr != model.QueueOK {
			r := receive(d.t, "AcquireAll", res)
			cancel()
			if werr != model.QueueOK {
				if !errors.Is(r.err, queueErr[werr]) || r.t != nil {
					d.fatalf("AcquireAll(%s, %v, %d) = %v, %v; model says %v", key, names, n, r.t, r.err, werr)
				}
				return
			}
			if r.err != nil {
				d.fatalf("AcquireAll(%s, %v, %d) = %v; model grants", key, names, n, r.err)
			}
			d.granted(id, r.t)
			return
		}
		p, _ := d.m.Pending()
		d.pending = &queuePending{id: p.ID, cancel: cancel, res: res}
		d.settle()
	case queueAcquireDone:
		names, key, n := d.request(a, b)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		tk, err := acquireAll(d.q, ctx, key, names, lanequeue.WithWeight(n))
		_, werr := d.m.Resolve(names, n)
		d.logf("AcquireAll(done ctx, %s, %v, %d) = %v (model %v)", key, names, n, err, werr)
		want := error(context.Canceled)
		if werr != model.QueueOK {
			want = queueErr[werr]
		}
		if !errors.Is(err, want) || tk != nil {
			d.fatalf("AcquireAll with a done context = %v, %v; want %v", tk, err, want)
		}
	case queueCancel:
		if d.pending == nil {
			return
		}
		p := d.pending
		d.logf("cancel the waiter %d", p.id)
		p.cancel()
		r := receive(d.t, "cancelled AcquireAll", p.res)
		if !errors.Is(r.err, context.Canceled) || r.t != nil {
			d.fatalf("cancelled AcquireAll returned %v, %v", r.t, r.err)
		}
		d.pending = nil
		d.m.Cancel()
	case queueRelease:
		id, ok := pick(d.tickets, a)
		if !ok {
			return
		}
		tk := d.tickets[id]
		delete(d.tickets, id)
		d.logf("Release(ticket %d)", id)
		if !tk.Release() {
			d.fatalf("first Release of ticket %d returned false", id)
		}
		d.released[id] = tk
		d.relIDs = append(d.relIDs, id)
		first, granted := d.m.Release(id)
		if !first {
			d.fatalf("model: first release of ticket %d not first", id)
		}
		if granted != 0 {
			d.wake(granted)
		}
	case queueDouble:
		if len(d.relIDs) == 0 {
			return
		}
		id := d.relIDs[int(a)%len(d.relIDs)]
		d.logf("Release(ticket %d) again", id)
		if d.released[id].Release() {
			d.fatalf("second Release of ticket %d returned true", id)
		}
		if first, _ := d.m.Release(id); first {
			d.fatalf("model: second release of ticket %d is first", id)
		}
	case queueClose:
		d.logf("Close()")
		d.q.Close()
		d.m.Close()
		if p := d.pending; p != nil {
			r := receive(d.t, "AcquireAll woken by Close", p.res)
			p.cancel()
			if !errors.Is(r.err, lanequeue.ErrClosed) || r.t != nil {
				d.fatalf("AcquireAll woken by Close returned %v, %v", r.t, r.err)
			}
			d.pending = nil
		}
	}
}

// settle waits until the waiting AcquireAll is where the model says: queued
// on the lane it waits on, holding the lanes before it. A release can move
// it on from one lane to the next (it wakes with the first, then queues on
// the second), and it does so in its own goroutine.
func (d *queueDriver) settle() {
	p := d.pending
	if p == nil {
		return
	}
	lane, _, _ := d.m.WaitingOn()
	eventually(d.t, fmt.Sprintf("AcquireAll to wait on %q", lane), func() bool {
		select {
		case r := <-p.res:
			d.fatalf("AcquireAll returned %v, %v; model says it waits on %q", r.t, r.err, lane)
		default:
		}
		return d.laneStats(lane).Waiters == 1 && d.holdsMatch()
	})
}

// wake collects the waiter that the model granted.
func (d *queueDriver) wake(id int) {
	p := d.pending
	if p == nil || p.id != id {
		d.fatalf("model granted %d, which is not the waiter", id)
	}
	r := receive(d.t, fmt.Sprintf("waiter %d", id), p.res)
	p.cancel()
	d.pending = nil
	if r.err != nil {
		d.fatalf("waiter %d got %v, model grants it", id, r.err)
	}
	d.logf("  waiter %d granted", id)
	d.granted(id, r.t)
}

// granted checks a new ticket against the model's and keeps it.
func (d *queueDriver) granted(id int, tk *lanequeue.Ticket[string]) {
	if tk == nil || tk.Released() {
		d.fatalf("grant %d: ticket %v", id, tk)
	}
	d.tickets[id] = tk
}

func (d *queueDriver) laneStats(name string) lanequeue.LaneStats {
	for _, s := range d.q.Stats() {
		if s.Name == name {
			return s
		}
	}
	d.fatalf("no lane %q in Stats", name)
	return lanequeue.LaneStats{}
}

// holdsMatch reports whether every lane holds what the model says (the
// waiter's partial holds included).
func (d *queueDriver) holdsMatch() bool {
	for _, s := range d.q.Stats() {
		if s.Kind != lanequeue.Rate && s.Held != d.m.Held(s.Name) {
			return false
		}
	}
	return true
}

func (d *queueDriver) check() {
	if err := d.m.Check(); err != nil {
		d.fatalf("%v", err)
	}
	d.settle()
	waitLane, _, waiting := d.m.WaitingOn()
	for _, s := range d.q.Stats() {
		if s.Kind != lanequeue.Rate && s.Held != d.m.Held(s.Name) {
			d.fatalf("lane %q holds %d, model %d (a partial ticket, or a permit not given back)", s.Name, s.Held, d.m.Held(s.Name))
		}
		want := 0
		if waiting && s.Name == waitLane {
			want = 1
		}
		if s.Waiters != want {
			d.fatalf("lane %q has %d waiters, model %d", s.Name, s.Waiters, want)
		}
	}
	var got []model.QueueHolder
	for _, h := range d.q.Holders() {
		got = append(got, model.QueueHolder{Lane: h.Lane, Key: h.Key, Weight: h.Weight})
	}
	model.SortQueueHolders(got)
	if want := d.m.Holders(); !slices.Equal(got, want) {
		d.fatalf("Holders() = %v, model %v", got, want)
	}
	if p := d.pending; p != nil {
		select {
		case r := <-p.res:
			d.fatalf("the waiter returned %v, %v while the model keeps it waiting", r.t, r.err)
		default:
		}
	}
}

// finish closes the queue, releases every ticket, and checks that every
// lane is empty.
func (d *queueDriver) finish() {
	d.step(queueClose, 0, 0)
	for _, id := range sortedIDs(d.tickets) {
		if !d.tickets[id].Release() {
			d.fatalf("final Release of ticket %d returned false", id)
		}
		d.m.Release(id)
		delete(d.tickets, id)
	}
	d.check()
	for _, s := range d.q.Stats() {
		if s.Held != 0 || s.Waiters != 0 {
			d.fatalf("after releasing everything, lane %q: %+v", s.Name, s)
		}
	}
	if h := d.q.Holders(); len(h) != 0 {
		d.fatalf("after releasing everything, Holders() = %v", h)
	}
}
