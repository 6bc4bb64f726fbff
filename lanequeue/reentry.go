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
// AcquireAll with it for t's key on one of t's lanes fails with
// [ErrReentrant], and one during a drain is admitted as t's work.
func WithTicket[K comparable](ctx context.Context, t *Ticket[K]) context.Context {
	if t == nil {
		return ctx
	}
	return &ticketCtx[K]{Context: ctx, t: t}
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
// holds for key a lane of q that g asks for: waiting for it would wait for
// the caller itself. Rate lanes hold nothing, so never conflict.
func (g *grant[K]) conflicts(q *Queue[K], key K, o *Ticket[K]) bool {
	if o.r == nil || o.r.q != q {
		return false
	}
	r := o.lock()
	if r == nil {
		return false // released
	}
	defer r.home.mu.Unlock()
	if r.key != key {
		return false
	}
	mine, theirs := g.held(), r.g.held()
	for i := range mine {
		e := mine[i].e
		if e.kind == Rate {
			continue
		}
		for j := range theirs {
			if theirs[j].e == e {
				return true
			}
		}
	}
	return false
}
