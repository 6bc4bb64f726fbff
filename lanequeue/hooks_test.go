package lanequeue_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// events collects what the hooks report, with the hook that got it.
type events struct {
	mu  sync.Mutex
	all []hookEvent
}

// hookEvent is an Event and the hook it went to.
type hookEvent struct {
	What string // "slow-wait", "long-hold" or "rejected"
	lanequeue.Event[string]
}

// on returns the hook that records its events as what.
func (e *events) on(what string) func(lanequeue.Event[string]) {
	return func(ev lanequeue.Event[string]) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.all = append(e.all, hookEvent{what, ev})
	}
}

func (e *events) take() []hookEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.all
	e.all = nil
	return out
}

// On the fake clock: a wait longer than the bound is reported when it
// ends (a shorter one is not), a hold longer than the bound at its release,
// once per lane held, and a full line's refusal at once.
func TestHooks(t *testing.T) {
	q, clk := watchQueue(t)
	var got events
	q.SetHooks(lanequeue.Hooks[string]{
		SlowWait: time.Second, OnSlowWait: got.on("slow-wait"),
		LongHold: time.Minute, OnLongHold: got.on("long-hold"),
		OnReject: got.on("rejected"),
	})
	ctx := context.Background()
	lanes := []string{"session", "global"}
	t0 := clk.Now()
	a, err := acquireAll(q, ctx, "a", lanes)
	must(t, err)
	// A call is listed a moment before it joins the lane's line: wait
	// for the line itself, so that b is first in it.
	b := acquireAsync(ctx, q, "b", lanes)
	testkit.Eventually(t, "b in line", func() bool { return laneStats(t, q, "global").Waiters == 1 })
	c := acquireAsync(ctx, q, "c", lanes)
	testkit.Eventually(t, "c in line", func() bool { return laneStats(t, q, "global").Waiters == 2 })
	if _, err := acquireAll(q, ctx, "d", lanes); !errors.Is(err, semaphore.ErrQueueFull) {
		t.Fatalf("a third waiter: %v, want ErrQueueFull", err)
	}
	ev := got.take()
	if len(ev) != 1 || ev[0].What != "rejected" || ev[0].Lane != "global" || ev[0].Key != "d" || ev[0].Weight != 1 || !errors.Is(ev[0].Err, semaphore.ErrQueueFull) {
		t.Fatalf("after the refusal, events %+v; want one Rejected on global for d", ev)
	}
	clk.Advance(2 * time.Minute)
	a.Release() // held 2m: a long hold on both lanes; b waited 2m
	rb := receive(t, b)
	must(t, rb.err)
	testkit.Eventually(t, "two events", func() bool { got.mu.Lock(); defer got.mu.Unlock(); return len(got.all) == 3 })
	ev = got.take()
	var holds, waits []lanequeue.Event[string]
	for _, e := range ev {
		switch e.What {
		case "long-hold":
			holds = append(holds, e.Event)
		case "slow-wait":
			waits = append(waits, e.Event)
		}
	}
	if len(holds) != 2 || holds[0].Lane != "session" || holds[1].Lane != "global" || holds[0].Key != "a" || holds[0].Duration != 2*time.Minute || !holds[0].Since.Equal(t0) {
		t.Fatalf("long holds %+v; want a's session and global, 2m since t0", holds)
	}
	if len(waits) != 1 || waits[0].Lane != "global" || waits[0].Key != "b" || waits[0].Duration != 2*time.Minute || waits[0].Err != nil {
		t.Fatalf("slow waits %+v; want b's 2m wait for global, granted", waits)
	}
	clk.Advance(500 * time.Millisecond)
	rb.t.Release() // held 0.5s: no event; c waited 2.5m
	rc := receive(t, c)
	must(t, rc.err)
	rc.t.Release()
	ev = got.take()
	if len(ev) != 1 || ev[0].What != "slow-wait" || ev[0].Key != "c" || ev[0].Duration != 2*time.Minute+500*time.Millisecond {
		t.Fatalf("events %+v; want only c's slow wait", ev)
	}
	// A short wait is not reported.
	a, err = acquireAll(q, ctx, "a", lanes)
	must(t, err)
	b = acquireAsync(ctx, q, "b", lanes)
	testkit.Eventually(t, "a waiter", func() bool { return len(q.Waiters()) == 1 })
	a.Release()
	rb = receive(t, b)
	must(t, rb.err)
	rb.t.Release()
	if ev := got.take(); len(ev) != 0 {
		t.Fatalf("a wait of 0 and a hold of 0 reported: %+v", ev)
	}
	q.SetHooks(lanequeue.Hooks[string]{}) // off
	a, err = acquireAll(q, ctx, "a", lanes)
	must(t, err)
	clk.Advance(time.Hour)
	a.Release()
	if ev := got.take(); len(ev) != 0 {
		t.Fatalf("hooks removed, still reported: %+v", ev)
	}
}

// LogHooks logs each event with its lane, key, weight and durations.
func TestLogHooks(t *testing.T) {
	q, clk := watchQueue(t)
	var buf bytes.Buffer
	var mu sync.Mutex
	h := slog.NewTextHandler(&lockedWriter{&mu, &buf}, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "since" {
			return slog.Attr{}
		}
		return a
	}})
	q.SetHooks(lanequeue.LogHooks[string](slog.New(h), time.Second, time.Minute))
	ctx := context.Background()
	lanes := []string{"session", "global"}
	a, err := acquireAll(q, ctx, "a", lanes)
	must(t, err)
	b := acquireAsync(ctx, q, "b", lanes)
	testkit.Eventually(t, "a waiter", func() bool { return len(q.Waiters()) == 1 })
	clk.Advance(90 * time.Second)
	a.Release()
	rb := receive(t, b)
	must(t, rb.err)
	rb.t.Release()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{
		`level=WARN msg="lanequeue: long hold" lane=session kind=keyed key=a weight=1 held=1m30s`,
		`level=WARN msg="lanequeue: long hold" lane=global kind=global key=a weight=1 held=1m30s`,
		`level=WARN msg="lanequeue: slow wait" lane=global kind=global key=b weight=1 waited=1m30s`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
