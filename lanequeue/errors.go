package lanequeue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// LaneError is the error of a call that a lane refused or that its context
// ended on while it waited there: the lane's name tells a busy key from a
// full budget, and errors.Is and errors.As reach the cause. Of the errors
// known in advance only semaphore.ErrTooHeavy is one. Do not change its fields.
type LaneError struct {
	Lane       string        // the lane's name in the queue
	Kind       Kind          // the lane's kind
	Key        any           // the call's key, on a keyed lane; else nil
	RetryAfter time.Duration // when a rate lane's tokens come or a cooling lane reopens; 0 if unknown
	Err        error         // the cause: the context's error, or the lane's
}

// Error reads as `lanequeue: lane "session" busy for key "t1": context
// deadline exceeded`, or `lanequeue: lane "global": lanes: wait queue
// full`.
func (e *LaneError) Error() string {
	var b strings.Builder
	b.WriteString("lanequeue: lane ")
	b.WriteString(strconv.Quote(e.Lane))
	waited := errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded)
	switch {
	case errors.Is(e.Err, errCooling):
		waited = false // the cause says it: cooling down
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
