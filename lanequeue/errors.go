package lanequeue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// LaneError is the error of a call that failed on one lane while taking
// it: [Queue.AcquireAll], [Queue.Do], [Queue.Join] and [Place.Wait] return
// one (as a *LaneError) when a lane refused the call (a full wait queue,
// too many keys, a wait that took too long, a lane closed on its own) or
// when the context ended while the call waited for the lane. It names the
// lane, so that a timeout tells whether the caller waited for its key
// ("session" busy) or for a shared budget ("global" full). A context that
// is found ended only once every lane has granted (see AcquireAll's
// Cancellation) gives the bare ctx.Err(): every lane granted, so none is
// to blame.
//
// The cause stays reachable: errors.Is(err, context.DeadlineExceeded),
// errors.Is(err, ErrQueueFull) and the other sentinels hold as they did
// for the cause alone, and errors.As finds a *LaneError under any wrapping:
//
//	var le *lanequeue.LaneError
//	if errors.As(err, &le) && le.RetryAfter > 0 { ... }
//
// Errors known before anything is taken are not LaneErrors (no lane was
// waited on), but for one that a lane decides: an unknown lane, a weight
// below 1, a closed or draining queue are plain errors, while a weight
// above a lane's MaxWeight ([ErrTooHeavy]) is a LaneError that names the
// lane that could never grant it, with the call's Key on a keyed lane
// ([Queue.Check], which has no key, leaves Key nil).
//
// A LaneError is built only on the failure path: a call that succeeds
// pays nothing for it. Its fields must not be changed once returned.
type LaneError struct {
	Lane string // the lane's name in the queue
	Kind Kind   // the lane's kind
	// Key is the key the call waited for, on a keyed lane; nil on the
	// other kinds, whose budget is shared by every key.
	Key any
	// RetryAfter is how long until the lane can grant what the call asked,
	// where the lane knows it: for a rate lane, when the tokens the call
	// needs would be there. 0 when unknown (a semaphore does not know
	// when its holders will release).
	RetryAfter time.Duration
	// Err is the cause: the context's error, or the lane's (a sentinel of
	// package semaphore or keyedsem, possibly wrapped).
	Err error
}

// Error reads, for a context that ended while the call waited:
//
//	lanequeue: lane "session" busy for key "t1": context deadline exceeded
//	lanequeue: lane "global" full: context deadline exceeded
//	lanequeue: lane "rpm" out of tokens (next in 1.5s): context deadline exceeded
//
// and for a lane's refusal:
//
//	lanequeue: lane "global": lanes: wait queue full
//	lanequeue: lane "session": keyedsem: too many keys
//
// (the key of a refusal is in Key, not in the text, which is the same
// for every key, as [Queue.Check]'s is).
func (e *LaneError) Error() string {
	var b strings.Builder
	b.WriteString("lanequeue: lane ")
	b.WriteString(strconv.Quote(e.Lane))
	waited := errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded)
	switch {
	case waited && e.Kind == Keyed:
		b.WriteString(" busy for key ")
		writeKey(&b, e.Key)
	case waited && e.Kind == Global:
		b.WriteString(" full")
	case waited && e.Kind == Rate:
		b.WriteString(" out of tokens")
	}
	if e.RetryAfter > 0 {
		if waited && e.Kind == Rate {
			b.WriteString(" (next in ")
		} else {
			b.WriteString(" (retry after ")
		}
		b.WriteString(e.RetryAfter.String())
		b.WriteByte(')')
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *LaneError) Unwrap() error { return e.Err }

// writeKey writes a key as %q would a string and %v anything else, without
// fmt's reflection for the usual string and integer keys.
func writeKey(b *strings.Builder, key any) {
	switch k := key.(type) {
	case string:
		b.WriteString(strconv.Quote(k))
	case int:
		b.WriteString(strconv.Itoa(k))
	case int64:
		b.WriteString(strconv.FormatInt(k, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(k, 10))
	default:
		b.WriteString(fmt.Sprint(k))
	}
}

// newLaneError is the error of the lane of e for key, caused by err.
func newLaneError[K comparable](e *laneEntry[K], key K, err error, retry time.Duration) *LaneError {
	le := &LaneError{Lane: e.name, Kind: e.kind, Err: err, RetryAfter: retry}
	if e.kind == Keyed {
		le.Key = key
	}
	return le
}

// keyedErr gives err, an error of resolve for a call for key, the key
// when it is the LaneError of a keyed lane (a weight above the lane's
// MaxWeight): resolve, which Check shares, knows no key. The LaneError is
// the call's own, made by resolve.
func keyedErr[K comparable](err error, key K) error {
	if le, ok := err.(*LaneError); ok && le.Kind == Keyed {
		le.Key = key
	}
	return err
}

// errTokensLate is errRateDeadline as the cause of a LaneError, which
// says the rest.
var errTokensLate = fmt.Errorf("tokens come after the context's deadline: %w", context.DeadlineExceeded)

// rateWaitError is the error of takeRates when the tokens of the request's
// i-th rate lane (the one whose tokens come last) would come after the
// context's deadline, or the context ended while the call waited for
// them: it says which lane and how long until its tokens, so that
// AcquireAll can name the lane. rateLane.Acquire, whose callers know the
// lane, returns err alone.
type rateWaitError struct {
	i     int           // the index in takeRates' reqs
	after time.Duration // until the tokens are there
	err   error         // errRateDeadline or the context's error
}

func (e *rateWaitError) Error() string { return e.err.Error() }
func (e *rateWaitError) Unwrap() error { return e.err }
