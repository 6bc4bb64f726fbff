package waitq_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A chain wakes its waiters once each, in the order they were added, and
// leaves no wake-list link behind.
func TestChainWakesInOrderOnce(t *testing.T) {
	var c waitq.Cache
	ws := []*waitq.Waiter{c.Get(), c.Get(), c.Get()}
	var chain waitq.Chain
	if chain.First() != nil {
		t.Fatal("an empty chain has a first waiter")
	}
	for _, w := range ws {
		chain.Add(w)
	}
	if chain.First() != ws[0] || ws[0].WNext != ws[1] || ws[1].WNext != ws[2] {
		t.Fatal("the chain is not in the order of Add")
	}
	waitq.WakeAll(chain.First())
	for i, w := range ws {
		if w.WNext != nil {
			t.Fatalf("waiter %d keeps a wake-list link", i)
		}
		select {
		case <-w.Ready:
		default:
			t.Fatalf("waiter %d was not woken", i)
		}
		select {
		case <-w.Ready:
			t.Fatalf("waiter %d was woken twice", i)
		default:
		}
	}
}

// Put clears a waiter's outcome, so that a reused waiter starts unserved.
func TestPutClearsTheOutcome(t *testing.T) {
	var c waitq.Cache
	w := c.Get()
	w.N, w.Served, w.Err, w.Gen = 3, true, errors.New("x"), 7
	c.Put(w)
	got := c.Get()
	if got != w {
		t.Fatal("the cache did not hand back the waiter kept in its slot")
	}
	if got.N != 0 || got.Served || got.Err != nil || got.Tok != nil || got.Gen != 0 {
		t.Fatalf("a reused waiter kept its outcome: %+v", *got)
	}
}

type countingOwner struct{ released int64 }

func (o *countingOwner) ReleaseToken(_ *permit.Token, n int64) { o.released += n }
func (o *countingOwner) CountDoubleRelease(*permit.Token)      {}

// Outcome turns a served waiter into what its caller gets back: the permit
// of a grant, or the error of a failure with no permit; either way the
// waiter goes back to the cache.
func TestOutcome(t *testing.T) {
	var c waitq.Cache
	o := &countingOwner{}
	tok := permit.NewToken(o, -1)

	w := c.Get()
	w.N, w.Served, w.Tok, w.Gen = 2, true, tok, tok.Gen()
	p, err := c.Outcome(w)
	if err != nil || p.Weight() != 2 || permit.TokenOf(p) != tok {
		t.Fatalf("a grant gave permit of weight %d through %p, error %v; want weight 2 through %p", p.Weight(), permit.TokenOf(p), err, tok)
	}
	if !p.Release() || o.released != 2 {
		t.Fatalf("the granted permit did not give 2 units back (owner got %d)", o.released)
	}
	if c.Get() != w {
		t.Fatal("Outcome did not put the waiter back")
	}

	failure := errors.New("closed")
	// A failed waiter may still carry a token from an earlier life: the
	// error alone decides.
	w.N, w.Served, w.Err, w.Tok, w.Gen = 1, true, failure, tok, tok.Gen()
	p, err = c.Outcome(w)
	if err != failure || p.Valid() {
		t.Fatalf("a failure gave error %v and a valid permit %v; want %v and none", err, p.Valid(), failure)
	}
	if c.Get() != w {
		t.Fatal("Outcome did not put the failed waiter back")
	}
}
