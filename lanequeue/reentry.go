package lanequeue

import "context"

// ticketCtx is a context that carries a ticket, for the re-entry check.
// Its Value answers ticketCtxKey[K] with itself; the check then goes on
// from the parent, so that every ticket in a chain of contexts is seen.
type ticketCtx[K comparable] struct {
	context.Context
	t *Ticket[K]
}

type ticketCtxKey[K comparable] struct{}

func (c *ticketCtx[K]) Value(key any) any {
	if _, ok := key.(ticketCtxKey[K]); ok {
		return c
	}
	return c.Context.Value(key)
}

// WithTicket returns ctx carrying t (nil t: ctx). While t is held, an
// AcquireAll with it that would wait for t fails with [ErrReentrant] (see
// the package doc, Re-entry): one for t's key on one of t's keyed or
// global lanes, or for another key on a global or fair lane of this
// package of t's whose capacity, as it stands, cannot hold t's permits
// and the call's together. One during a drain is admitted as t's work.
func WithTicket[K comparable](ctx context.Context, t *Ticket[K]) context.Context {
	if t == nil {
		return ctx
	}
	return &ticketCtx[K]{Context: ctx, t: t}
}

// WorkContext returns ctx carrying t, as [WithTicket] does, that also ends
// when a permit of t from a [Leased] lane ends before t is released (a
// fleet lane's lease lost in Redis, or the lane closed), with the permit's
// reason as its cause: the work t admits must stop then, since the lane
// may grant the permit to another holder. Call stop when the work is done,
// before releasing t; it ends the context with context.Canceled, and may be
// called more than once. WorkContext is safe to call concurrently with any
// method of t. For a ticket without such a permit, or released, it returns
// WithTicket(ctx, t) and a stop that does nothing. [Queue.Do] gives its fn
// such a context.
func WorkContext[K comparable](ctx context.Context, t *Ticket[K]) (_ context.Context, stop func()) {
	if t == nil || t.r == nil || !t.r.q.leased.Load() { // a ticket's record is set once, before it is handed out
		return WithTicket(ctx, t), noStop
	}
	r := t.lock()
	if r == nil {
		return WithTicket(ctx, t), noStop
	}
	var buf [inlineLanes]held[K]
	hs := buf[:0]
	for _, h := range r.g.held() {
		if h.e.leased != nil {
			hs = append(hs, h)
		}
	}
	r.home.mu.Unlock()
	return work(ctx, t, hs)
}

// noStop is the stop of a work context that watches nothing.
func noStop() {}

// work is WorkContext for hs, lanes of t that its caller read (under the
// record's lock, or as t's owner, which no one else can release): it
// watches the permits of the Leased ones. A ticket without one costs no
// allocation beyond WithTicket's. If a lane's PermitContext panics, what
// work set up is undone before the panic goes on, to a caller that
// releases t.
func work[K comparable](ctx context.Context, t *Ticket[K], hs []held[K]) (_ context.Context, stop func()) {
	ctx = WithTicket(ctx, t)
	var w *workWatch
	done := false
	defer func() {
		if !done && w != nil {
			w.stop()
		}
	}()
	for i := range hs {
		l := hs[i].e.leased
		if l == nil {
			continue
		}
		pc := l.PermitContext(hs[i].p)
		if pc == nil {
			continue
		}
		if w == nil {
			w = new(workWatch)
			w.ctx, w.cancel = context.WithCancelCause(ctx)
		}
		if pc.Err() != nil { // ended already: the work must not start live
			w.cancel(context.Cause(pc))
			continue
		}
		cancel := w.cancel
		w.stops = append(w.stops, context.AfterFunc(pc, func() { cancel(context.Cause(pc)) }))
	}
	done = true
	if w == nil {
		return ctx, noStop
	}
	return w.ctx, w.stop
}

// workWatch is a work context that watches permits' contexts (see work).
type workWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool
}

// stop ends the watch and the work context, with context.Canceled.
func (w *workWatch) stop() {
	for _, s := range w.stops {
		s()
	}
	w.cancel(context.Canceled)
}

// TicketFrom returns the innermost ticket ctx carries.
func TicketFrom[K comparable](ctx context.Context) (*Ticket[K], bool) {
	c, ok := ctx.Value(ticketCtxKey[K]{}).(*ticketCtx[K])
	if !ok {
		return nil, false
	}
	return c.t, true
}

// conflicts reports whether o, a ticket carried by the caller's context,
// holds a lane of q that g asks for and could not grant while o holds it:
// waiting for it would wait for the caller itself. That is any lane o
// holds for key; and, for another key, a global lane of this package whose
// capacity cannot hold o's permits and g's together (a keyed lane of
// another key is another line, and a global lane with room for both lets
// a call for another key nest, as a sub-task's would). Rate lanes hold
// nothing, so never conflict.
func (g *grant[K]) conflicts(q *Queue[K], key K, o *Ticket[K]) bool {
	if o.r == nil || o.r.q != q {
		return false
	}
	r := o.lock()
	if r == nil {
		return false // released
	}
	defer r.home.mu.Unlock()
	same := r.key == key
	mine, theirs := g.held(), r.g.held()
	for i := range mine {
		e := mine[i].e
		if e.kind == Rate || (!same && e.capSem == nil) {
			continue
		}
		for j := range theirs {
			if theirs[j].e == e && (same || theirs[j].n+mine[i].n > e.capSem.Capacity()) {
				return true
			}
		}
	}
	return false
}
