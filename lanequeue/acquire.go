package lanequeue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// LaneWeight(lane, n) takes n on the named lane, whatever
// [semaphore.Weight] says for the others: 4 on "global" for a big job, 1 on
// its "session". A lane not in the set is a bad setting
// (semaphore.ErrInvalidConfig).
func LaneWeight(lane string, n int64) semaphore.AcquireOption {
	return call.Make(call.KindWeight, lane, n)
}

// AcquireAll takes every lane of the set for key, in canonical order, and
// returns a Ticket; opts give the weight ([semaphore.Weight], [LaneWeight])
// and the place in the lines that order by one. On failure it returns nil,
// holding nothing: a sentinel or ctx.Err() before taking anything, then a
// [*LaneError] for the lane that refused the call or that ctx ended on
// (ctx.Err() if ctx ended after the last grant). A rate lane whose tokens
// come after ctx's deadline fails it at once, ctx.Err() still nil (a
// token lane's when they come after the head's tokens and its own, as
// things stand: see docs/api-details.md): test errors with errors.Is.
// Cancellation: see the package doc. AcquireAll panics if ctx is nil.
func (q *Queue[K]) AcquireAll(ctx context.Context, key K, lanes LaneSet[K], opts ...semaphore.AcquireOption) (*Ticket[K], error) {
	if ctx == nil {
		panic("lanequeue: nil Context")
	}
	// The grant is built on the stack: a call that fails allocates
	// nothing, and one that succeeds allocates only the ticket's handle.
	var g grant[K]
	if err := q.resolve(&g, lanes, opts); err != nil {
		return nil, keyedErr(err, key)
	}
	turn, err := turnOf(opts)
	if err != nil {
		return nil, err
	}
	if q.nanKeys && key != key {
		return nil, keyedsem.ErrNaNKey
	}
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return nil, ctx.Err()
		default:
		}
	}
	if err := q.admit(); err != nil && !q.admitNested(ctx) {
		return nil, err
	}
	if err := checkReentry(ctx, q, key, &g); err != nil {
		q.leave()
		return nil, err
	}
	if err := q.acquireFrom(ctx, key, &g, 0, turn); err != nil {
		q.leave()
		return nil, err
	}
	return q.publish(key, &g), nil
}

// acquireFrom takes the lanes g.held()[from:] for key, in order, the ones
// before from being held already (a Place's keyed lane), and then looks
// at ctx once more. On failure it returns AcquireAll's error and holds
// nothing: every permit of g, those before from too, is released, newest
// first. turn places the caller in the lines of the lanes that order
// their waiters (the zero Turn: none). Code of the program that panics
// (a hook, a lane's) does the same and counts the call out before the
// panic goes on (see unwind).
func (q *Queue[K]) acquireFrom(ctx context.Context, key K, g *grant[K], from int, turn call.Turn) error {
	hs := g.held()
	plain := g.plain
	if q.cooling.Load() {
		if err := q.checkCool(ctx, key, g); err != nil {
			rollback(g, from)
			q.abandon(g)
			return err
		}
	}
	for i := from; i < plain; i++ {
		h := &hs[i]
		// A lane that grants at once is taken without a trace, also after
		// the call waited for an earlier lane: only a lane that could not
		// grant at once lists the call as waiting (Queue.Waiters) and is
		// reported to the hooks as a wait.
		if h.e.tryFirst() && ctx.Err() == nil {
			if p, ok := h.e.tryAcquireTurn(key, h.n, turn); ok {
				h.p = p
				continue
			}
		}
		if err := q.waitOn(ctx, key, g, i, turn); err != nil {
			return err
		}
	}
	if q.cooling.Load() {
		if err := q.coolHolding(ctx, key, g, plain, turn); err != nil {
			rollback(g, plain)
			q.abandon(g)
			return err
		}
	}
	if plain < len(hs) {
		if err := q.rateTail(ctx, key, g, plain); err != nil {
			rollback(g, plain)
			q.abandon(g)
			if q.closed.Load() {
				return semaphore.ErrClosed
			}
			return err
		}
	} else if ctx.Err() != nil {
		// Every permit is held, but ctx ended on the way: before the last
		// grant, perhaps (a lane that granted across the cancellation, or
		// one that grants at once without looking at ctx). The end wins:
		// give everything back, as a cancelled waiter would.
		rollback(g, plain)
		q.abandon(g)
		return ctx.Err()
	}
	return nil
}

// waitOn takes lane i of g, for key, the way that may wait: it lists the
// call as waiting for the lane (waitFor), acquires it, and reports the
// wait to the hooks, timed from its own start. On failure it returns
// acquireFrom's error and holds nothing.
//
// What it calls may be code of the program: a fair lane's tenant
// function, a semaphore's WithFairShare weight function (both asked only
// by a call that waits), a lane of another package, the hooks. If any of
// it panics, the call gives back what it holds before the panic goes on
// (unwind). The defer is paid on this path only: a lane that grants at
// once (acquireFrom's try) calls none of it.
func (q *Queue[K]) waitOn(ctx context.Context, key K, g *grant[K], i int, turn call.Turn) error {
	h := &g.held()[i]
	taken, done := i, false // the lanes held: those before i, and i once granted
	defer func() {
		if !done {
			q.unwind(g, taken)
		}
	}()
	since := q.waitFor(key, g, i, false)
	var p semaphore.Permit
	var err error
	if turn != (call.Turn{}) {
		p, err = h.e.acquireTurn(ctx, key, h.n, turn)
	} else {
		p, err = h.e.acquire(ctx, key, h.n)
	}
	if err == nil {
		// Recorded before a hook runs, so that a hook that panics gives
		// this permit back with the others.
		h.p = p
		taken++
	}
	if hk := q.watch.hooks.Load(); hk != nil {
		q.waited(hk, key, g, i, err, since, h.e.groupOf(key, turn))
	}
	done = true
	if err != nil {
		rollback(g, i)
		q.abandon(g)
		return q.laneErr(h.e, key, err)
	}
	return nil
}

// rateTail takes the rate lanes g.held()[from:], for key (takeRateTail),
// and reports a wait for their tokens to the hooks. A call with hooks, or
// with a rate lane of another package, takes them as waitOn takes a lane,
// so that a hook or the lane that panics leaves the call holding nothing;
// a call with neither runs no code of the program there, and no defer.
func (q *Queue[K]) rateTail(ctx context.Context, key K, g *grant[K], from int) error {
	hk := q.watch.hooks.Load()
	if hk == nil && !g.foreign(from) {
		_, err := q.takeRateTail(ctx, key, g, from)
		return err
	}
	done := false
	defer func() {
		if !done {
			q.unwind(g, from)
		}
	}()
	since, err := q.takeRateTail(ctx, key, g, from)
	if hk != nil {
		q.waited(hk, key, g, from, err, since, "")
	}
	done = true
	return err
}

// unwind is the end of a call whose code of the program (a hook, a lane's
// function, a lane of another package) panicked while it held the first
// taken lanes of g: it gives them back newest first, drops the call's
// record and counts the call out (what a failure of acquireFrom and its
// caller's leave do), so that the call holds nothing and Drain does not
// wait for it; the panic then goes on. It is deferred around such code
// only.
func (q *Queue[K]) unwind(g *grant[K], taken int) {
	rollback(g, taken)
	q.abandon(g)
	q.leave()
}

// TryAcquireAll takes every lane of the set without waiting, or nothing,
// and reports which. It overtakes no waiter but on a barging lane; false
// may mean an error AcquireAll gives at once ([Queue.Check] tells).
func (q *Queue[K]) TryAcquireAll(key K, lanes LaneSet[K], opts ...semaphore.AcquireOption) (*Ticket[K], bool) {
	// Work on a grant on the stack, so that a try that fails (a scheduler
	// polling busy keys) allocates nothing.
	var g grant[K]
	if q.resolve(&g, lanes, opts) != nil || (q.nanKeys && key != key) {
		return nil, false
	}
	turn, err := turnOf(opts)
	if err != nil {
		return nil, false // a try never waits: its Turn orders nothing but a reorder hold's number
	}
	if q.cooling.Load() {
		if e, _ := g.cooling(q.now().UnixNano()); e != nil {
			return nil, false
		}
	}
	if q.admit() != nil {
		return nil, false
	}
	hs := g.held()
	plain := g.plain
	for i := 0; i < plain; i++ {
		h := &hs[i]
		var p semaphore.Permit
		var ok bool
		if h.e.tryFirst() { // a lane of this package: no code of the program
			p, ok = h.e.tryAcquireTurn(key, h.n, turn)
		} else {
			p, ok = q.tryForeign(key, &g, i)
		}
		if !ok {
			rollback(&g, i)
			q.leave()
			return nil, false
		}
		h.p = p
	}
	if plain < len(hs) && !q.tryTail(key, &g, plain) {
		rollback(&g, plain)
		q.leave()
		return nil, false
	}
	return q.publish(key, &g), true
}

// tryForeign is TryAcquireAll's try of lane i of g, a lane of another
// package: if its code panics, the lanes before i are given back and the
// call counted out (unwind) before the panic goes on.
func (q *Queue[K]) tryForeign(key K, g *grant[K], i int) (semaphore.Permit, bool) {
	done := false
	defer func() {
		if !done {
			q.unwind(g, i)
		}
	}()
	h := &g.held()[i]
	p, ok := h.e.lane.TryAcquire(key, h.n)
	done = true
	return p, ok
}

// tryTail is tryRateTail for TryAcquireAll: a tail with a rate lane of
// another package is tried as tryForeign tries a lane.
func (q *Queue[K]) tryTail(key K, g *grant[K], from int) bool {
	if !g.foreign(from) {
		return tryRateTail(key, g, from)
	}
	done := false
	defer func() {
		if !done {
			q.unwind(g, from)
		}
	}()
	ok := tryRateTail(key, g, from)
	done = true
	return ok
}

// Do runs fn under a ticket of the set for key, released when fn returns
// ([Ticket.Finish] with fn's error) or panics (a plain Release: a lane's
// [Observer] hears nothing of work whose outcome is unknown). fn's ctx
// is the ticket's [WorkContext]: it carries the ticket, and ends when a
// permit of a [Leased] lane does (a fleet lane's lease lost). Do returns
// AcquireAll's error, without calling fn, or fn's. A nil fn panics.
func (q *Queue[K]) Do(ctx context.Context, key K, lanes LaneSet[K], fn func(context.Context) error, opts ...semaphore.AcquireOption) error {
	if fn == nil { // before a wait, not as a nil call with the lanes held
		panic("lanequeue: Do with a nil fn")
	}
	t, err := q.AcquireAll(ctx, key, lanes, opts...)
	if err != nil {
		return err
	}
	finished, stop := false, noStop
	defer func() {
		if !finished { // fn (or a lane's PermitContext) panicked: release, report nothing
			stop()
			t.Release()
		}
	}()
	// Do owns t, so its lanes are read without the lock (see work), and
	// only if the queue has a Leased lane.
	wctx := WithTicket(ctx, t)
	if q.leased.Load() {
		wctx, stop = work(ctx, t, t.r.g.held())
	}
	err = fn(wctx)
	finished = true
	stop()
	t.Finish(err)
	return err
}

// Check returns the error AcquireAll would return at once for the set and
// opts, whatever the key, or nil, taking nothing (a diagnosis: it reads
// every lane), in the order AcquireAll looks: the set and opts, the
// drain, then the lanes. For a lane that cools down ([Queue.Cooldown]) it
// returns a [*LaneError] whose RetryAfter says when the lane reopens: a
// call waits for that, or fails at once with such a LaneError, wrapping
// its context's error, if its deadline comes first.
func (q *Queue[K]) Check(lanes LaneSet[K], opts ...semaphore.AcquireOption) error {
	var g grant[K]
	if err := q.resolve(&g, lanes, opts); err != nil {
		return err
	}
	if _, err := turnOf(opts); err != nil {
		return err
	}
	if q.drain.draining.Load() {
		return ErrDraining // as admit refuses it, before any lane
	}
	if q.cooling.Load() {
		now := q.now().UnixNano()
		if e, until := g.cooling(now); e != nil {
			return &LaneError{Lane: e.name, Kind: e.kind, Err: errCooling, RetryAfter: time.Duration(until - now)}
		}
	}
	hs := g.held()
	for i := range hs {
		if err := hs[i].e.check(hs[i].n); err != nil {
			return err
		}
	}
	return nil
}

// check returns the error that acquiring n on e would fail with at once,
// as far as the lanes of this package tell without trying: a lane closed
// on its own, a rate lane that can never grant n.
func (e *laneEntry[K]) check(n int64) error {
	switch l := e.lane.(type) {
	case *globalLane[K]:
		if l.s.Stats().Closed {
			return &LaneError{Lane: e.name, Kind: e.kind, Err: semaphore.ErrClosed}
		}
	case *fairLane[K]:
		if l.s.Stats().Closed {
			return &LaneError{Lane: e.name, Kind: e.kind, Err: semaphore.ErrClosed}
		}
	case *keyedLane[K]:
		if l.s.Stats().Closed {
			return &LaneError{Lane: e.name, Kind: e.kind, Err: semaphore.ErrClosed}
		}
	case *rateLane[K]:
		if l.isClosed.Load() {
			return semaphore.ErrClosed
		}
		if err := l.never(n); err != nil {
			return err
		}
	}
	return nil
}

// checkReentry fails if ctx carries a held ticket that g, for key on q,
// would wait for.
func checkReentry[K comparable](ctx context.Context, q *Queue[K], key K, g *grant[K]) error {
	v := ctx.Value(ticketCtxKey[K]{})
	for v != nil {
		c := v.(*ticketCtx[K])
		if g.conflicts(q, key, c.t) {
			return fmt.Errorf("%w: the context holds a ticket on one of these lanes that this call would wait for", ErrReentrant)
		}
		v = c.Context.Value(ticketCtxKey[K]{})
	}
	return nil
}

// rollback releases the permits of the first i lanes of g, newest first.
func rollback[K comparable](g *grant[K], i int) {
	hs := g.held()
	for j := i - 1; j >= 0; j-- {
		hs[j].p.Release()
		hs[j].p = semaphore.Permit{}
	}
}

// laneErr maps the failure of the lane e, taken for key, to AcquireAll's
// error: semaphore.ErrClosed when the queue is closed, otherwise a *LaneError that
// names the lane and wraps err (the context's error, or the lane's: a lane
// closed on its own while the queue is open fails with semaphore.ErrClosed, the one
// sentinel of every package, named like any other error of a lane).
func (q *Queue[K]) laneErr(e *laneEntry[K], key K, err error) error {
	if q.closed.Load() {
		return semaphore.ErrClosed
	}
	retry := time.Duration(0)
	if r, ok := err.(retrier); ok { // a lane that knows when: a token lane, redislane's
		retry = max(r.RetryIn(), 0)
	}
	return newLaneError(e, key, err, retry)
}

// retrier is a lane's error that knows when the lane can grant again (a
// token lane's, redislane's LateError): LaneError.RetryAfter takes it. It is looked
// for on the error itself, not along its chain: errors.As would move its
// target to the heap on every refusal.
type retrier interface{ RetryIn() time.Duration }

// rateErr maps the failure of takeRates, on the rate lanes reqs of g (this
// package's, in the order of g.held()[from:]), to AcquireAll's error: a
// *LaneError naming the lane that the call waited for, or that refused it.
func (q *Queue[K]) rateErr(g *grant[K], from int, key K, reqs []rateReq[K], err error) error {
	var l *rateLane[K]
	retry := time.Duration(0)
	if we, ok := err.(*rateWaitError); ok {
		l, retry, err = reqs[we.i].l, max(we.after, 0), we.err
		if err == errRateDeadline {
			err = errTokensLate // the LaneError names the lane
		}
	} else if errors.Is(err, semaphore.ErrClosed) {
		for i := range reqs {
			if reqs[i].l.isClosed.Load() {
				l = reqs[i].l
				break
			}
		}
	}
	if l == nil {
		return err
	}
	hs := g.held()
	for i := from; i < len(hs); i++ {
		if hs[i].e.rate == l {
			return newLaneError(hs[i].e, key, err, retry)
		}
	}
	return err
}

// rateSplit collects the rate lanes of g.held()[from:] (the rate lanes
// come last): this package's rate lanes into reqs, for one joint reservation,
// and the others (from other packages) into ext.
func rateSplit[K comparable](g *grant[K], from int, reqs []rateReq[K], ext []int) ([]rateReq[K], []int) {
	hs := g.held()
	for i := from; i < len(hs); i++ {
		h := &hs[i]
		if h.e.rate != nil {
			reqs = append(reqs, rateReq[K]{l: h.e.rate, n: h.n})
		} else {
			ext = append(ext, i)
		}
	}
	return reqs, ext
}

// takeRateTail takes the rate lanes g.held()[from:], for key: this
// package's lanes together (takeRates), then the others one by one; when
// all of those can give a charge back, holding none of theirs while it
// waits for the first that refuses (tryAll). If
// one of those fails, the tokens reserved on this package's lanes are
// given back, and so are the charges of lanes that settle (permitSettler,
// redislane.AsRateLane); another package's other rate lanes cannot give
// their tokens back, so a call should name at most one such lane. since is when the
// call began to wait for the tokens (it was listed by waitFor), or noWait
// if it did not wait.
func (q *Queue[K]) takeRateTail(ctx context.Context, key K, g *grant[K], from int) (since int64, err error) {
	var reqBuf [inlineLanes]rateReq[K]
	var extBuf [inlineLanes]int
	reqs, ext := rateSplit(g, from, reqBuf[:0], extBuf[:0])
	since = noWait
	if len(ext) > 0 {
		since = q.waitFor(key, g, from, false) // a lane of another package may wait
	}
	if len(reqs) > 0 {
		// Listed as waiting (Queue.Waiters) once the tokens are due later.
		waiting := func() {
			if at := q.waitFor(key, g, from, false); since == noWait {
				since = at
			}
		}
		if err := takeRates(ctx, reqs, q.done, waiting); err != nil {
			return since, q.rateErr(g, from, key, reqs, err)
		}
	}
	hs := g.held()
	if len(ext) > 1 && undoable(hs, ext) {
		// A call holds no lane's charge while it waits for the first lane
		// that has no tokens (tryAll): it gives back what its tries took,
		// and waits for that lane before the others.
		if k := tryAll(key, hs, ext, reqs); k >= 0 {
			undoTokens(hs, ext)
			ext[0], ext[k] = ext[k], ext[0]
		}
	}
	restamp := len(ext) > 1 && restampable(hs, ext)
	for j, i := range ext {
		h := &hs[i]
		if h.p != (semaphore.Permit{}) {
			continue // taken by tryAll
		}
		if restamp && j > 0 && takeForeignRate(context.Background(), key, h, reqs, false) == nil {
			continue // taken without a wait: moments after the others
		}
		err := takeForeignRate(ctx, key, h, reqs, true)
		if err == nil && restamp && j > 0 {
			// It waited holding the charges of ext[:j]: move them to now.
			var at int
			at, err = restampTail(ctx, key, hs, ext[:j+1], j, reqs)
			h = &hs[ext[at]]
		}
		if err != nil {
			cancelRates(reqs)
			undoTokens(hs, ext)
			return since, q.laneErr(h.e, key, err)
		}
	}
	// Every permit is held. If ctx ended meanwhile, the end wins (see
	// AcquireAll); the caller rolls the other lanes back.
	if ctx.Err() != nil {
		cancelRates(reqs)
		undoTokens(hs, ext)
		for i := range reqs {
			reqs[i].l.cancelled.Add(1)
		}
		return since, ctx.Err()
	}
	commitRates(reqs)
	return since, nil
}

// tryAll tries the lanes hs[ext] (token lanes, all of which can give a
// charge back) without waiting, in order, and returns the index in ext of
// the first that refuses (it has no tokens now, or callers wait on it),
// or -1 if the call now holds them all. takeRateTail then gives back what
// the tries took and waits for that lane first: a call charged on one
// lane while it waits for another would spend the first lane's budget
// long before the call is made, which a provider that counts at arrival
// sees as more calls in its window than the lane allowed. It gives back
// once only: after that wait the call takes the other lanes, in order,
// holding what it has (trying first; waiting if the try fails, and then
// moving what it holds to the end of that wait: restampTail). Giving
// back again after each wait would cost the call its place in every line
// for good while the lanes have backlogs, since a try fails whenever
// someone waits on the lane.
func tryAll[K comparable](key K, hs []held[K], ext []int, reqs []rateReq[K]) int {
	for k, i := range ext {
		if hs[i].p != (semaphore.Permit{}) {
			continue
		}
		if takeForeignRate(context.Background(), key, &hs[i], reqs, false) != nil {
			return k
		}
	}
	return -1
}

// restampRounds bounds how many times restampTail takes a lane again
// whose charge left the window while the call waited for another.
const restampRounds = 2

// restampTail moves the charges of hs[ext], other than hs[ext[last]]
// which was just granted after a wait, to now: the call held them while it
// waited, and a provider counts the call when it arrives, moments from
// now, not when its first lane charged it. Left where they were, a call
// charged on its requests lane that then waited most of a window for its
// tokens lane reached the provider within the provider's window of calls
// that the requests lane had let in after its charge left the fleet's
// window: more than the budget in the provider's window
// (docs/benchmarks-fleet.md). A lane whose charge has left the window
// while the call waited (the wait lasted a window) is taken again,
// waiting, and the others are moved to the end of that wait, at most
// restampRounds times; after that the charges stay where they are. It
// returns the index in ext of the lane a failure is of.
//
// Why this keeps every budget and starves no call:
//   - A move passes no budget: the window ending now held the old charge
//     already (it has not left) and holds the moved one instead, so its
//     total stays within the budget; a later window holds the moved charge
//     (it holds now) whether or not it held the old one, and every later
//     grant checks the window ending at its own time, which counts it;
//     only windows that ended already lose it. So every window stays
//     within the budget, and the lane places the call where a provider
//     counting at arrival does. The cost: the charge counts up to the
//     wait's length longer, which later grants may wait out.
//   - A move takes nothing from the lane's budget and never waits: it
//     takes no place in any line and gives none back. The call waits as it
//     did before moves existed: once for the lane that refused its tries
//     (tryAll), then at most once in each other lane's line, holding what
//     it has, so later callers cannot pass it on a lane it holds; each of
//     those waits ends as that lane's own line does (a token lane's line is
//     first come, first served). A charge found gone adds a wait in a line,
//     at most restampRounds in all; those waits end too. A call that
//     gave back after every wait, as one version did, could lose its
//     place in every line for good while the lanes have backlogs by turns.
func restampTail[K comparable](ctx context.Context, key K, hs []held[K], ext []int, last int, reqs []rateReq[K]) (int, error) {
	for round := 0; ; round++ {
		gone := -1
		for k, i := range ext {
			if k != last && !restampHeld(ctx, &hs[i]) && gone < 0 {
				gone = k
			}
		}
		if gone < 0 {
			return last, nil
		}
		// That charge counts nothing now: taken again, waiting; the
		// others move to the end of that wait in the next round.
		h := &hs[ext[gone]]
		h.p = semaphore.Permit{}
		if err := takeForeignRate(ctx, key, h, reqs, true); err != nil {
			return gone, err
		}
		if round+1 == restampRounds {
			return gone, nil // its charge is new; the others stay where they are
		}
		last = gone
	}
}

// restampable reports whether every lane of hs[ext] can move a charge it
// made to now (a token lane of this package, or another package's that
// restamps).
func restampable[K comparable](hs []held[K], ext []int) bool {
	return tokenLanesOr[K, permitRestamper](hs, ext)
}

// undoable reports whether every lane of hs[ext] can give back what it
// charged a call (a token lane of this package, or another package's that
// settles).
func undoable[K comparable](hs []held[K], ext []int) bool {
	return tokenLanesOr[K, permitSettler](hs, ext)
}

// tokenLanesOr reports whether every lane of hs[ext] is a token lane of
// this package or another package's lane that implements I.
func tokenLanesOr[K comparable, I any](hs []held[K], ext []int) bool {
	for _, i := range ext {
		l := hs[i].e.lane
		if _, ok := l.(*tokenLane[K]); ok {
			continue
		}
		if _, ok := l.(I); !ok {
			return false
		}
	}
	return true
}

// errNoTokens is the failure of a rate lane of another package's
// TryAcquire, for takeForeignRate.
var errNoTokens = errors.New("lanequeue: no tokens now")

// takeForeignRate takes h, a rate lane of another package, for key while
// the tokens of reqs (the call's rate lanes of this package) are reserved:
// with Acquire if wait, else with TryAcquire (failing with errNoTokens).
// If the lane's code panics, the reservations are given back before the
// panic goes on; the caller's unwind gives back the lanes before the rate
// tail, and the charges the tail's other lanes made stay charged (more
// counted than used, never less).
func takeForeignRate[K comparable](ctx context.Context, key K, h *held[K], reqs []rateReq[K], wait bool) (err error) {
	done := false
	defer func() {
		if !done {
			cancelRates(reqs)
		}
	}()
	// The permit is kept: a rate lane's holds nothing, but may carry what
	// the lane needs to know of the grant later (a token lane's second,
	// for Ticket.Settle).
	var p semaphore.Permit
	if wait {
		p, err = h.e.lane.Acquire(ctx, key, h.n)
	} else if q, ok := h.e.lane.TryAcquire(key, h.n); ok {
		p = q
	} else {
		err = errNoTokens
	}
	if err == nil {
		h.p = p
	}
	done = true
	return err
}

// tryRateTail is takeRateTail without waiting.
func tryRateTail[K comparable](key K, g *grant[K], from int) bool {
	var reqBuf [inlineLanes]rateReq[K]
	var extBuf [inlineLanes]int
	reqs, ext := rateSplit(g, from, reqBuf[:0], extBuf[:0])
	if len(reqs) == 1 && len(ext) == 0 {
		// One lane: AllowN, which costs no reservation.
		_, ok := reqs[0].l.TryAcquire(key, reqs[0].n)
		return ok
	}
	if len(reqs) > 0 && !tryRates(reqs) {
		return false
	}
	hs := g.held()
	for _, i := range ext {
		if takeForeignRate(context.Background(), key, &hs[i], reqs, false) != nil {
			cancelRates(reqs)
			undoTokens(hs, ext)
			return false
		}
	}
	commitRates(reqs)
	return true
}
