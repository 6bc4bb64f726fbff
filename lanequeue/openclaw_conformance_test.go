package lanequeue_test

// The command queue test suites of OpenClaw, rewritten in this package's API:
// repository openclaw/openclaw, files src/process/command-queue.test.ts (read
// at commits 00a873df56dd and d71930802b2d, which has the conv: lane tests),
// src/process/command-queue.scoped-lanes.test.ts (ca43d0f9b563),
// src/process/command-queue.capacity-groups.test.ts (22ae65940738) and the
// lane key tests src/agents/pi-embedded-runner/lanes.test.ts (6556ccedfbab).
// Each test names the originals it ports ("describe > it").
//
// The API maps as follows (docs/compat.md has the reasons):
//
//	enqueueCommand(task)                   q.Do(ctx, key, []string{"main"}, fn) on a global lane "main" of capacity 1
//	enqueueCommandInLane(lane, task)       q.Do(ctx, key, []string{lane}, fn)
//	"session:<key>" / "conv:<...>" lanes    one keyed lane ("session") and the key; WithIdleTimeout(0) retires a key at once
//	setCommandLaneConcurrency(lane, n)     SetCapacity(n) on the semaphore given to NewGlobalLane
//	capacity group {budget, members}       one more global lane of the budget, named with the member lane
//	abortSignal                            ctx
//	getQueueSize(lane)                     LaneStats.Held + LaneStats.Waiters
//	getActiveTaskCount()                   len(q.Holders())
//	markGatewayDraining()                  q.Close() (also fails the queued callers)
//
// Not ported, because our API has no counterpart yet (docs/compat.md lists
// them): waitForActiveTasks (drain), onWait/warnAfterMs and the enqueue and
// dequeue logs (wait hooks), priorities and starvation promotion
// (command-queue.starvation.test.ts), capacity-group reservations and
// blockedBy, clearCommandLane of one lane, resetAllLanes/resetCommandLane,
// task timeouts and owner deadlines (command-queue.deadline.test.ts), and
// module-instance sharing, which has no meaning in Go.
//
// The originals await promises; here every wait is a channel or a Stats
// poll with a deadline (ocEventually), never a sleep.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// ocDeadline bounds every wait of this file.
const ocDeadline = 10 * time.Second

// ocEventually polls cond until it holds, and fails the test after
// ocDeadline; it yields first, then backs off.
func ocEventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ocDeadline)
	for i := 0; !cond(); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", ocDeadline, what)
		}
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// ocGateway is the OpenClaw command queue in our API: fixed global lanes
// whose semaphores the test keeps (to resize them, as
// setCommandLaneConcurrency does), and keyed lanes for the scoped
// "session:"-style lanes.
type ocGateway struct {
	q     *lanequeue.Queue[string]
	sems  map[string]*semaphore.Weighted
	keyed map[string]*keyedsem.KeyedSemaphore[string]
}

func ocNew(t testing.TB) *ocGateway {
	t.Helper()
	g := &ocGateway{
		q:     lanequeue.New[string](),
		sems:  map[string]*semaphore.Weighted{},
		keyed: map[string]*keyedsem.KeyedSemaphore[string]{},
	}
	t.Cleanup(g.q.Close)
	return g
}

// global adds a global lane of capacity n.
func (g *ocGateway) global(t testing.TB, name string, n int64) *ocGateway {
	t.Helper()
	s := semaphore.New(n)
	if err := g.q.Add(name, lanequeue.NewGlobalLane[string](s)); err != nil {
		t.Fatalf("Add(%q): %v", name, err)
	}
	g.sems[name] = s
	return g
}

// scoped adds a keyed lane; by default each key is retired as soon as it
// is unused, as OpenClaw retires a scoped lane.
func (g *ocGateway) scoped(t testing.TB, name string, opts ...keyedsem.Option) *ocGateway {
	t.Helper()
	ks := keyedsem.New[string](append([]keyedsem.Option{keyedsem.WithIdleTimeout(0)}, opts...)...)
	if err := g.q.Add(name, lanequeue.NewSessionLane(ks)); err != nil {
		t.Fatalf("Add(%q): %v", name, err)
	}
	g.keyed[name] = ks
	return g
}

func (g *ocGateway) stats(t testing.TB, lane string) lanequeue.LaneStats {
	t.Helper()
	for _, st := range g.q.Stats() {
		if st.Name == lane {
			return st
		}
	}
	t.Fatalf("no lane %q", lane)
	return lanequeue.LaneStats{}
}

// queueSize is getQueueSize(lane): callers running plus callers waiting.
func (g *ocGateway) queueSize(t testing.TB, lane string) int {
	st := g.stats(t, lane)
	return int(st.Held) + st.Waiters
}

// active is the number of tickets that hold lane now (OpenClaw's
// activeCount: tasks running, not tasks holding a member lane while they
// wait for a group's budget).
func (g *ocGateway) active(lane string) int {
	n := 0
	for _, h := range g.q.Holders() {
		if h.Lane == lane {
			n++
		}
	}
	return n
}

// ocTask is one enqueued command: it runs until its gate is opened, then
// returns its error.
type ocTask struct {
	started chan struct{}
	gate    chan struct{}
	done    chan error
	fail    error
}

// run enqueues a command on lanes for key, as enqueueCommandInLane does.
func (g *ocGateway) run(ctx context.Context, key string, lanes ...string) *ocTask {
	return g.runFailing(ctx, nil, key, lanes...)
}

// runFailing enqueues a command whose task returns fail once released.
func (g *ocGateway) runFailing(ctx context.Context, fail error, key string, lanes ...string) *ocTask {
	k := &ocTask{started: make(chan struct{}), gate: make(chan struct{}), done: make(chan error, 1), fail: fail}
	go func() {
		k.done <- g.q.Do(ctx, key, lanes, func(context.Context) error {
			close(k.started)
			<-k.gate
			return k.fail
		})
	}()
	return k
}

// queued enqueues a command and returns once it waits on lane (whose
// waiters grow by one).
func (g *ocGateway) queued(t testing.TB, ctx context.Context, key, lane string, lanes ...string) *ocTask {
	t.Helper()
	want := g.stats(t, lane).Waiters + 1
	k := g.run(ctx, key, lanes...)
	ocEventually(t, fmt.Sprintf("a command to queue on %q", lane), func() bool {
		select {
		case <-k.started:
			t.Fatalf("the command on %v started instead of queueing", lanes)
		default:
		}
		return g.stats(t, lane).Waiters == want
	})
	return k
}

func (k *ocTask) release() { close(k.gate) }

func (k *ocTask) waitStarted(t testing.TB) {
	t.Helper()
	select {
	case <-k.started:
	case err := <-k.done:
		t.Fatalf("the command ended with %v before its task started", err)
	case <-time.After(ocDeadline):
		t.Fatal("the command's task did not start")
	}
}

func (k *ocTask) notStarted(t testing.TB) {
	t.Helper()
	select {
	case <-k.started:
		t.Fatal("the command's task started, but should still wait")
	default:
	}
}

func (k *ocTask) result(t testing.TB) error {
	t.Helper()
	select {
	case err := <-k.done:
		return err
	case <-time.After(ocDeadline):
		t.Fatal("the command did not finish")
		return nil
	}
}

// TestConformanceOpenClawEmptyQueue ports "command queue > resetAllLanes is
// safe when no lanes have been created" (openclaw/openclaw,
// src/process/command-queue.test.ts). There is no reset; what a queue with
// no lanes must do is report nothing active and refuse work without
// panicking, and Close twice.
func TestConformanceOpenClawEmptyQueue(t *testing.T) {
	t.Parallel()
	q := lanequeue.New[string]()
	if n := len(q.Holders()); n != 0 {
		t.Fatalf("getActiveTaskCount() = %d on an empty queue", n)
	}
	if _, err := q.AcquireAll(context.Background(), "k", []string{"main"}); !errors.Is(err, lanequeue.ErrUnknownLane) {
		t.Fatalf("AcquireAll of an unknown lane = %v, want ErrUnknownLane", err)
	}
	if _, err := q.AcquireAll(context.Background(), "k", nil); !errors.Is(err, lanequeue.ErrNoLanes) {
		t.Fatalf("AcquireAll of no lanes = %v, want ErrNoLanes", err)
	}
	q.Close()
	q.Close()
	if n := len(q.Holders()); n != 0 {
		t.Fatalf("getActiveTaskCount() = %d after Close", n)
	}
}

// TestConformanceOpenClawRunsTasksOneAtATimeInOrder ports "command queue >
// runs tasks one at a time in order" (openclaw/openclaw,
// src/process/command-queue.test.ts): three commands on the main lane run in
// the order they were enqueued, never two at once, and the lane is empty
// afterwards. The first is held until the other two are queued, so that
// "the order they were enqueued" is well defined between goroutines.
func TestConformanceOpenClawRunsTasksOneAtATimeInOrder(t *testing.T) {
	t.Parallel()
	g := ocNew(t).global(t, "main", 1)
	var active, maxActive atomic.Int32
	var mu sync.Mutex
	var calls []int
	gate := make(chan struct{})
	results := make([]chan error, 3)
	for i := range 3 {
		id := i + 1
		results[i] = make(chan error, 1)
		want := g.stats(t, "main").Waiters + 1
		go func() {
			results[i] <- g.q.Do(context.Background(), "", []string{"main"}, func(context.Context) error {
				n := active.Add(1)
				for m := maxActive.Load(); n > m && !maxActive.CompareAndSwap(m, n); m = maxActive.Load() {
				}
				mu.Lock()
				calls = append(calls, id)
				mu.Unlock()
				if id == 1 {
					<-gate
				}
				runtime.Gosched()
				active.Add(-1)
				return nil
			})
		}()
		if id == 1 {
			ocEventually(t, "task 1 to run", func() bool { return g.active("main") == 1 })
		} else {
			ocEventually(t, fmt.Sprintf("task %d to queue", id), func() bool { return g.stats(t, "main").Waiters == want })
		}
	}
	close(gate)
	for i, ch := range results {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("task %d: %v", i+1, err)
			}
		case <-time.After(ocDeadline):
			t.Fatalf("task %d did not finish", i+1)
		}
	}
	if !slices.Equal(calls, []int{1, 2, 3}) {
		t.Fatalf("calls = %v, want [1 2 3]", calls)
	}
	if m := maxActive.Load(); m != 1 {
		t.Fatalf("maxActive = %d, want 1", m)
	}
	if n := g.queueSize(t, "main"); n != 0 {
		t.Fatalf("getQueueSize() = %d after the tasks, want 0", n)
	}
}

// TestConformanceOpenClawActiveTaskCount ports "command queue >
// getActiveTaskCount returns count of currently executing tasks"
// (openclaw/openclaw, src/process/command-queue.test.ts): one running
// command is one holder, and none once it is done.
func TestConformanceOpenClawActiveTaskCount(t *testing.T) {
	t.Parallel()
	g := ocNew(t).global(t, "main", 1)
	k := g.run(context.Background(), "", "main")
	k.waitStarted(t)
	if n := len(g.q.Holders()); n != 1 {
		t.Fatalf("getActiveTaskCount() = %d with one running task, want 1", n)
	}
	k.release()
	if err := k.result(t); err != nil {
		t.Fatal(err)
	}
	if n := len(g.q.Holders()); n != 0 {
		t.Fatalf("getActiveTaskCount() = %d after the task, want 0", n)
	}
}

// TestConformanceOpenClawCloseRejectsQueuedKeepsActive ports "command queue
// > clearCommandLane rejects pending promises", "rejects new enqueues with
// GatewayDrainingError after markGatewayDraining" and "does not affect
// already-active tasks after markGatewayDraining" (openclaw/openclaw,
// src/process/command-queue.test.ts). Our one call for both is Close: it
// fails the queued caller (ErrClosed, where clearCommandLane rejects with
// CommandLaneClearedError) and every later call (ErrClosed, where draining
// gives GatewayDrainingError), and leaves the running task alone: it
// finishes with its own result. Unlike clearCommandLane, Close acts on every
// lane and is final (resetAllLanes re-allows enqueues; nothing reopens a
// closed queue).
func TestConformanceOpenClawCloseRejectsQueuedKeepsActive(t *testing.T) {
	t.Parallel()
	g := ocNew(t).global(t, "main", 1)
	first := g.run(context.Background(), "", "main")
	first.waitStarted(t)
	second := g.queued(t, context.Background(), "", "main", "main")
	if w := g.stats(t, "main").Waiters; w != 1 {
		t.Fatalf("queued (not active) entries = %d, want 1", w)
	}

	g.q.Close()
	if err := second.result(t); !errors.Is(err, lanequeue.ErrClosed) {
		t.Fatalf("the queued command = %v, want ErrClosed", err)
	}
	second.notStarted(t)
	if err := g.q.Do(context.Background(), "", []string{"main"}, func(context.Context) error {
		t.Error("a command enqueued after Close ran")
		return nil
	}); !errors.Is(err, lanequeue.ErrClosed) {
		t.Fatalf("a command after Close = %v, want ErrClosed", err)
	}

	first.release()
	if err := first.result(t); err != nil {
		t.Fatalf("the active command = %v, want its own result", err)
	}
	if n := len(g.q.Holders()); n != 0 {
		t.Fatalf("%d holders after the active command finished", n)
	}
}

// TestConformanceOpenClawAbortBeforeEnqueue ports "command queue > rejects
// immediately when abortSignal is already aborted" (openclaw/openclaw,
// src/process/command-queue.test.ts): a context that has already ended
// fails at once with its error (CommandLaneAbortError there), the task never
// runs, even though the lane is free.
func TestConformanceOpenClawAbortBeforeEnqueue(t *testing.T) {
	t.Parallel()
	g := ocNew(t).global(t, "main", 1)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("already cancelled"))
	err := g.q.Do(ctx, "", []string{"main"}, func(context.Context) error {
		t.Error("the task of an aborted command ran")
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a done context = %v, want context.Canceled", err)
	}
	if n := g.queueSize(t, "main"); n != 0 {
		t.Fatalf("getQueueSize() = %d, want 0", n)
	}
}

// TestConformanceOpenClawAbortWhileQueued ports "command queue > rejects
// queued task when abortSignal fires while waiting" (openclaw/openclaw,
// src/process/command-queue.test.ts): the cancelled command fails with the
// context's error and leaves the queue at once; only the running one remains.
func TestConformanceOpenClawAbortWhileQueued(t *testing.T) {
	t.Parallel()
	g := ocNew(t).global(t, "main", 1)
	blocker := g.run(context.Background(), "", "main")
	blocker.waitStarted(t)
	ctx, cancel := context.WithCancel(context.Background())
	second := g.queued(t, ctx, "", "main", "main")
	if n := g.queueSize(t, "main"); n < 2 {
		t.Fatalf("getQueueSize() = %d, want >= 2", n)
	}

	cancel()
	if err := second.result(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("the aborted command = %v, want context.Canceled", err)
	}
	second.notStarted(t)
	if n := g.queueSize(t, "main"); n != 1 {
		t.Fatalf("getQueueSize() = %d after the abort, want 1 (the blocker)", n)
	}

	blocker.release()
	if err := blocker.result(t); err != nil {
		t.Fatal(err)
	}
	if n := g.queueSize(t, "main"); n != 0 {
		t.Fatalf("getQueueSize() = %d at the end, want 0", n)
	}
}

// TestConformanceOpenClawAbortAfterStart ports "command queue > does not
// reject a task that already started when abortSignal fires"
// (openclaw/openclaw, src/process/command-queue.test.ts): once the task
// runs, ending the context changes nothing; the lane stays held until the
// task returns, and the command returns the task's result.
func TestConformanceOpenClawAbortAfterStart(t *testing.T) {
	t.Parallel()
	g := ocNew(t).global(t, "main", 1)
	ctx, cancel := context.WithCancel(context.Background())
	k := g.run(ctx, "", "main")
	k.waitStarted(t)
	if n := len(g.q.Holders()); n != 1 {
		t.Fatalf("getActiveTaskCount() = %d, want 1", n)
	}
	cancel()
	if n := g.active("main"); n != 1 {
		t.Fatalf("the lane was given up (%d holders) when the running task's context ended", n)
	}
	k.release()
	if err := k.result(t); err != nil {
		t.Fatalf("the started command = %v, want its task's result", err)
	}
}

// TestConformanceOpenClawAbortRemovesOnlyTargetedEntry ports "command queue
// > abort removes only the targeted entry from the queue"
// (openclaw/openclaw, src/process/command-queue.test.ts): of two queued
// commands, the cancelled one leaves; the other still runs after the first.
func TestConformanceOpenClawAbortRemovesOnlyTargetedEntry(t *testing.T) {
	t.Parallel()
	g := ocNew(t).global(t, "abort-targeted", 1)
	first := g.run(context.Background(), "", "abort-targeted")
	first.waitStarted(t)
	ctx, cancel := context.WithCancel(context.Background())
	second := g.queued(t, ctx, "", "abort-targeted", "abort-targeted")
	third := g.queued(t, context.Background(), "", "abort-targeted", "abort-targeted")
	if n := g.queueSize(t, "abort-targeted"); n < 3 {
		t.Fatalf("getQueueSize() = %d, want >= 3", n)
	}

	cancel()
	if err := second.result(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("the aborted command = %v, want context.Canceled", err)
	}
	if n := g.queueSize(t, "abort-targeted"); n < 2 {
		t.Fatalf("getQueueSize() = %d after the abort, want >= 2 (third still queued)", n)
	}
	third.notStarted(t)

	first.release()
	if err := first.result(t); err != nil {
		t.Fatal(err)
	}
	third.waitStarted(t)
	third.release()
	if err := third.result(t); err != nil {
		t.Fatal(err)
	}
}

// TestConformanceOpenClawSetConcurrency ports "command queue >
// setCommandLaneConcurrency skips drain when value unchanged"
// (openclaw/openclaw, src/process/command-queue.test.ts, d71930802b2d) and
// the resize part of "scoped command lane lifecycle > preserves explicitly
// configured and paused dynamic lanes"
// (src/process/command-queue.scoped-lanes.test.ts). Setting the same
// capacity changes nothing (a queued command still waits); growing it lets
// the queued command run. OpenClaw's concurrency 0 pauses a lane and keeps
// its queue; ours differs: a capacity of 0 can grant nothing, so SetCapacity(0)
// fails the queued commands with ErrTooHeavy and new ones fail at once,
// until the capacity grows again.
func TestConformanceOpenClawSetConcurrency(t *testing.T) {
	t.Parallel()
	g := ocNew(t).global(t, "idem", 2)
	s := g.sems["idem"]
	a := g.run(context.Background(), "", "idem")
	b := g.run(context.Background(), "", "idem")
	a.waitStarted(t)
	b.waitStarted(t)
	c := g.queued(t, context.Background(), "", "idem", "idem")

	before := g.stats(t, "idem")
	s.SetCapacity(2) // unchanged
	if after := g.stats(t, "idem"); after != before {
		t.Fatalf("SetCapacity to the same value changed the lane: %+v -> %+v", before, after)
	}
	c.notStarted(t)
	s.SetCapacity(3)
	c.waitStarted(t)
	for _, k := range []*ocTask{a, b, c} {
		k.release()
		if err := k.result(t); err != nil {
			t.Fatal(err)
		}
	}

	// A paused lane: concurrency 0.
	g.global(t, "paused", 1)
	ps := g.sems["paused"]
	holder := g.run(context.Background(), "", "paused")
	holder.waitStarted(t)
	waiting := g.queued(t, context.Background(), "", "paused", "paused")
	ps.SetCapacity(0)
	if err := waiting.result(t); !errors.Is(err, lanequeue.ErrTooHeavy) {
		t.Fatalf("a command queued on a lane set to 0 = %v, want ErrTooHeavy (OpenClaw keeps it queued)", err)
	}
	if err := g.run(context.Background(), "", "paused").result(t); !errors.Is(err, lanequeue.ErrTooHeavy) {
		t.Fatalf("a command on a lane of 0 = %v, want ErrTooHeavy at once", err)
	}
	ps.SetCapacity(1)
	holder.release()
	if err := holder.result(t); err != nil {
		t.Fatal(err)
	}
	resumed := g.run(context.Background(), "", "paused")
	resumed.waitStarted(t)
	resumed.release()
	if err := resumed.result(t); err != nil {
		t.Fatalf("a command after the lane grew back = %v", err)
	}
	if names := g.q.Names(); !slices.Contains(names, "idem") || !slices.Contains(names, "paused") {
		t.Fatalf("configured lanes went away: %v", names)
	}
}
