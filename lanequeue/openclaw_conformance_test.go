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
//	enqueueCommand(task)                   doAll(q, ctx, key, []string{"main"}, fn) on a global lane "main" of capacity 1
//	enqueueCommandInLane(lane, task)       doAll(q, ctx, key, []string{lane}, fn)
//	"session:<key>" / "conv:<...>" lanes    one keyed lane ("session") and the key; WithIdleTimeout(0) retires a key at once
//	setCommandLaneConcurrency(lane, n)     SetCapacity(n) on the semaphore given to NewGlobalLane
//	capacity group {budget, members}       one more global lane of the budget, named with the member lane
//	abortSignal                            ctx
//	getQueueSize(lane)                     LaneStats.Held + LaneStats.Waiters
//	getActiveTaskCount()                   len(q.Holders())
//	markGatewayDraining()                  q.Close() (also fails the queued callers)
//
// Not ported, because our API has no counterpart yet (docs/compat.md lists
// them; the drain of markGatewayDraining + waitForActiveTasks is Drain, tested
// in drain_test.go): onWait/warnAfterMs and the enqueue and
// dequeue logs (wait hooks), priorities and starvation promotion
// (command-queue.starvation.test.ts), capacity-group reservations and
// blockedBy, clearCommandLane of one lane, resetAllLanes/resetCommandLane,
// task timeouts and owner deadlines (command-queue.deadline.test.ts), and
// module-instance sharing, which has no meaning in Go.
//
// The originals await promises; here every wait is a channel or a Stats
// poll with a deadline (testkit.Eventually), never a sleep.

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

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// ocGateway is the OpenClaw command queue in our API: fixed global lanes
// whose semaphores the test keeps (to resize them, as
// setCommandLaneConcurrency does), and keyed lanes for the scoped
// "session:"-style lanes.
type ocGateway struct {
	q     *lanequeue.Queue[string]
	sems  map[string]*semaphore.Weighted
	keyed map[string]*keyedsem.Keyed[string]
}

func ocNew(t testing.TB) *ocGateway {
	t.Helper()
	g := &ocGateway{
		q:     lanequeue.New[string](),
		sems:  map[string]*semaphore.Weighted{},
		keyed: map[string]*keyedsem.Keyed[string]{},
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
	if err := g.q.Add(name, lanequeue.NewKeyedLane(ks)); err != nil {
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
		if h.Lane == lane && !h.Waiting { // a command runs once its ticket is whole
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
		k.done <- doAll(g.q, ctx, key, lanes, func(context.Context) error {
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
	testkit.Eventually(t, fmt.Sprintf("a command to queue on %q", lane), func() bool {
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
	case <-time.After(testkit.Deadline):
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
	case <-time.After(testkit.Deadline):
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
	if _, err := acquireAll(q, context.Background(), "k", []string{"main"}); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("AcquireAll of an unknown lane = %v, want ErrUnknownLane", err)
	}
	if _, err := acquireAll(q, context.Background(), "k", nil); !errors.Is(err, semaphore.ErrInvalidConfig) {
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
			results[i] <- doAll(g.q, context.Background(), "", []string{"main"}, func(context.Context) error {
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
			testkit.Eventually(t, "task 1 to run", func() bool { return g.active("main") == 1 })
		} else {
			testkit.Eventually(t, fmt.Sprintf("task %d to queue", id), func() bool { return g.stats(t, "main").Waiters == want })
		}
	}
	close(gate)
	for i, ch := range results {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("task %d: %v", i+1, err)
			}
		case <-time.After(testkit.Deadline):
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
	if err := second.result(t); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("the queued command = %v, want ErrClosed", err)
	}
	second.notStarted(t)
	if err := doAll(g.q, context.Background(), "", []string{"main"}, func(context.Context) error {
		t.Error("a command enqueued after Close ran")
		return nil
	}); !errors.Is(err, semaphore.ErrClosed) {
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
	err := doAll(g.q, ctx, "", []string{"main"}, func(context.Context) error {
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
	if err := waiting.result(t); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("a command queued on a lane set to 0 = %v, want ErrTooHeavy (OpenClaw keeps it queued)", err)
	}
	if err := g.run(context.Background(), "", "paused").result(t); !errors.Is(err, semaphore.ErrTooHeavy) {
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
	if names := lanequeue.Names(g.q); !slices.Contains(names, "idem") || !slices.Contains(names, "paused") {
		t.Fatalf("configured lanes went away: %v", names)
	}
}

// TestConformanceOpenClawEvictsIdleConvLanes ports "command queue > evicts
// idle conv: lanes after task completion" and "does not evict non-conv:
// lanes after task completion" (openclaw/openclaw,
// src/process/command-queue.test.ts, d71930802b2d): a conversation's lane
// is gone once its task is done, and comes back for the next task; a
// configured lane stays, with its capacity. Ours: the conversation is a key
// of a keyed lane with WithIdleTimeout(0) (by default an idle key is kept
// for an hour, then evicted); a global lane is never evicted.
func TestConformanceOpenClawEvictsIdleConvLanes(t *testing.T) {
	t.Parallel()
	g := ocNew(t).scoped(t, "conv").global(t, "session-test", 1)
	const key = "discord:acc1:channel:123"
	for round := range 2 {
		k := g.run(context.Background(), key, "conv", "session-test")
		k.waitStarted(t)
		if n := g.stats(t, "conv").Keys; n != 1 {
			t.Fatalf("round %d: %d conv entries while the task runs, want 1", round, n)
		}
		k.release()
		if err := k.result(t); err != nil {
			t.Fatal(err)
		}
		if n := g.queueSize(t, "conv"); n != 0 {
			t.Fatalf("round %d: getQueueSize(conv) = %d, want 0", round, n)
		}
		if n := g.stats(t, "conv").Keys; n != 0 {
			t.Fatalf("round %d: the conv entry was not evicted (%d left)", round, n)
		}
	}
	if st := g.keyed["conv"].Stats(); st.Created != 2 || st.Evicted != 2 {
		t.Fatalf("conv entries: %+v, want made and evicted twice", st)
	}
	if st := g.stats(t, "session-test"); st.Capacity != 1 || !slices.Contains(lanequeue.Names(g.q), "session-test") {
		t.Fatalf("the configured lane changed or went away: %+v %v", st, lanequeue.Names(g.q))
	}
}

// TestConformanceOpenClawRetiresIndependentScopedLanes ports "scoped command
// lane lifecycle > retires ten independently completed %s lanes from the
// shared registry" for session:, nested: and
// context-engine-turn-maintenance: (openclaw/openclaw,
// src/process/command-queue.scoped-lanes.test.ts): ten keys run at once (all
// ten are inside before any leaves), and afterwards none is left, nothing
// is active, and the results come back in order.
func TestConformanceOpenClawRetiresIndependentScopedLanes(t *testing.T) {
	t.Parallel()
	prefixes := []string{"session", "nested", "context-engine-turn-maintenance"}
	g := ocNew(t)
	for _, p := range prefixes {
		g.scoped(t, p)
	}
	for _, lane := range prefixes {
		var active, peak atomic.Int32
		allStarted := make(chan struct{})
		results := make([]chan error, 10)
		for i := range 10 {
			results[i] = make(chan error, 1)
			key := fmt.Sprintf("agent:main:autoqa-%d", i)
			go func() {
				results[i] <- doAll(g.q, context.Background(), key, []string{lane}, func(context.Context) error {
					n := active.Add(1)
					for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
					}
					if n == 10 {
						close(allStarted)
					}
					select {
					case <-allStarted:
					case <-time.After(testkit.Deadline):
						return errors.New("the ten keys never ran at once")
					}
					active.Add(-1)
					return nil
				})
			}()
		}
		for i, ch := range results {
			select {
			case err := <-ch:
				if err != nil {
					t.Fatalf("%s key %d: %v", lane, i, err)
				}
			case <-time.After(testkit.Deadline):
				t.Fatalf("%s key %d did not finish", lane, i)
			}
		}
		if p := peak.Load(); p != 10 {
			t.Fatalf("%s: peak %d keys at once, want 10", lane, p)
		}
		if n := len(g.q.Holders()); n != 0 {
			t.Fatalf("%s: getActiveTaskCount() = %d, want 0", lane, n)
		}
		if n := g.keyed[lane].Len(); n != 0 {
			t.Fatalf("%s: %d scoped entries left, want 0", lane, n)
		}
	}
}

// TestConformanceOpenClawKeepsScopedLaneUntilSuccessorFinishes ports "scoped
// command lane lifecycle > keeps a session lane until its queued successor
// finishes" (openclaw/openclaw,
// src/process/command-queue.scoped-lanes.test.ts): while a second command of
// the key waits or runs, the key's entry stays; it goes when the last is
// done.
func TestConformanceOpenClawKeepsScopedLaneUntilSuccessorFinishes(t *testing.T) {
	t.Parallel()
	g := ocNew(t).scoped(t, "session")
	const key = "agent:main:autoqa-queued"
	first := g.run(context.Background(), key, "session")
	first.waitStarted(t)
	second := g.queued(t, context.Background(), key, "session", "session")
	if n := g.keyed["session"].Len(); n != 1 {
		t.Fatalf("%d entries with one running and one queued, want 1", n)
	}
	first.release()
	if err := first.result(t); err != nil {
		t.Fatal(err)
	}
	second.waitStarted(t)
	if st := g.stats(t, "session"); st.Keys != 1 || st.Held != 1 || st.Waiters != 0 {
		t.Fatalf("with the successor running: %+v, want 1 key, 1 active, 0 queued", st)
	}
	second.release()
	if err := second.result(t); err != nil {
		t.Fatal(err)
	}
	if n := g.keyed["session"].Len(); n != 0 {
		t.Fatalf("%d entries after the last command, want 0", n)
	}
}

// TestConformanceOpenClawPreservesFixedLanes ports "scoped command lane
// lifecycle > preserves gateway-managed fixed lanes while scoped lanes
// finish" and the configured-lane half of "preserves explicitly configured
// and paused dynamic lanes" (openclaw/openclaw,
// src/process/command-queue.scoped-lanes.test.ts): fixed lanes keep their
// configuration, idle, while the scoped keys that ran are retired.
func TestConformanceOpenClawPreservesFixedLanes(t *testing.T) {
	t.Parallel()
	fixed := []string{"main", "system-agent", "cron", "cron-nested", "skill-workshop-review", "subagent", "nested"}
	g := ocNew(t).scoped(t, "scoped")
	for _, lane := range fixed {
		g.global(t, lane, 1)
	}
	g.global(t, "configured", 2)
	var runs []*ocTask
	for _, key := range []string{"session:agent:main:autoqa-fixed", "nested:agent:main:autoqa-fixed", "context-engine-turn-maintenance:agent:main:autoqa-fixed"} {
		runs = append(runs, g.run(context.Background(), key, "scoped"))
	}
	runs = append(runs, g.run(context.Background(), "", "configured"), g.run(context.Background(), "", "configured"))
	for _, k := range runs {
		k.release()
		if err := k.result(t); err != nil {
			t.Fatal(err)
		}
	}
	for _, lane := range append(fixed, "configured") {
		st := g.stats(t, lane)
		want := int64(1)
		if lane == "configured" {
			want = 2
		}
		if st.Capacity != want || st.Held != 0 || st.Waiters != 0 {
			t.Fatalf("fixed lane %q: %+v, want idle with capacity %d", lane, st, want)
		}
	}
	if n := g.keyed["scoped"].Len(); n != 0 {
		t.Fatalf("%d scoped entries left, want 0", n)
	}
}

// TestConformanceOpenClawRecreatesScopedLaneForFollowUp ports "scoped
// command lane lifecycle > recreates a maintenance lane for deferred
// same-session follow-up work" (openclaw/openclaw,
// src/process/command-queue.scoped-lanes.test.ts): follow-up work enqueued
// for the key once its first command is done gets a fresh entry (a new one
// is made: Created goes to 2), which is retired in turn.
func TestConformanceOpenClawRecreatesScopedLaneForFollowUp(t *testing.T) {
	t.Parallel()
	g := ocNew(t).scoped(t, "maintenance")
	const key = "agent:main:autoqa-rerun"
	first := g.run(context.Background(), key, "maintenance")
	first.release()
	if err := first.result(t); err != nil {
		t.Fatal(err)
	}
	follow := g.run(context.Background(), key, "maintenance")
	follow.waitStarted(t)
	ks := g.keyed["maintenance"]
	if st := ks.Stats(); st.Keys != 1 || st.Created != 2 || st.Held != 1 {
		t.Fatalf("with the follow-up running: %+v, want a second entry, held", st)
	}
	follow.release()
	if err := follow.result(t); err != nil {
		t.Fatal(err)
	}
	if n := ks.Len(); n != 0 {
		t.Fatalf("%d entries after the follow-up, want 0", n)
	}
}

// TestConformanceOpenClawRetiresScopedLaneAfterFailure ports "scoped command
// lane lifecycle > retires a scoped lane after its active task rejects"
// (openclaw/openclaw, src/process/command-queue.scoped-lanes.test.ts): the
// task's error comes back from Do, and the key is retired as after success.
func TestConformanceOpenClawRetiresScopedLaneAfterFailure(t *testing.T) {
	t.Parallel()
	g := ocNew(t).scoped(t, "nested")
	boom := errors.New("scoped task failed")
	k := g.runFailing(context.Background(), boom, "agent:main:autoqa-rejected", "nested")
	k.release()
	if err := k.result(t); !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want the task's error", err)
	}
	if n := g.keyed["nested"].Len(); n != 0 {
		t.Fatalf("%d entries after the failed task, want 0", n)
	}
}

// ocGroup builds the capacity-group fixture of
// command-queue.capacity-groups.test.ts: member lanes cron-nested,
// hook-dispatch and delivery-dispatch of 8 each, and the group's budget as a
// global lane of its own that every member's command also names.
func ocGroup(t testing.TB, budget int64) *ocGateway {
	g := ocNew(t)
	for _, lane := range []string{"cron-nested", "hook-dispatch", "delivery-dispatch"} {
		g.global(t, lane, 8)
	}
	return g.global(t, "group", budget)
}

// TestConformanceOpenClawGroupBudgetNeverExceeded ports "command lane
// capacity groups > total active never exceeds the group budget" and the
// budget half of "a member may use the full group budget beyond its
// reservation" (openclaw/openclaw,
// src/process/command-queue.capacity-groups.test.ts): twenty commands over
// two members of a group of 8 run 8 at a time, never more, and one member
// alone may use the whole budget. Reservations are not supported (a member's
// reserved share); without them the budget is simply shared.
func TestConformanceOpenClawGroupBudgetNeverExceeded(t *testing.T) {
	t.Parallel()
	g := ocGroup(t, 8)
	var runs []*ocTask
	for i := range 20 {
		member := "cron-nested"
		if i%2 == 1 {
			member = "hook-dispatch"
		}
		runs = append(runs, g.run(context.Background(), "", member, "group"))
	}
	waiting := func() int {
		n := 0
		for _, st := range g.q.Stats() {
			n += st.Waiters
		}
		return n
	}
	testkit.Eventually(t, "the group to fill", func() bool { return g.active("group") == 8 && waiting() == 12 })
	if n := g.active("cron-nested") + g.active("hook-dispatch"); n != 8 {
		t.Fatalf("%d members active, want exactly the budget 8", n)
	}
	for _, k := range runs {
		k.release()
	}
	for _, k := range runs {
		if err := k.result(t); err != nil {
			t.Fatal(err)
		}
	}
	if st := g.stats(t, "group"); st.Acquired != 20 || st.Held != 0 {
		t.Fatalf("group: %+v", st)
	}

	var solo []*ocTask
	for range 9 {
		solo = append(solo, g.run(context.Background(), "", "hook-dispatch", "group"))
	}
	testkit.Eventually(t, "one member to fill the group", func() bool { return g.active("hook-dispatch") == 8 && g.stats(t, "group").Waiters == 1 })
	for _, k := range solo {
		k.release()
	}
	for _, k := range solo {
		if err := k.result(t); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConformanceOpenClawGroupFreedCapacityWakesSibling ports "command lane
// capacity groups > capacity freed by one member wakes a queued sibling" and
// "a failing task releases group capacity like a successful one"
// (openclaw/openclaw, src/process/command-queue.capacity-groups.test.ts): a
// member waiting for the group's budget starts when another member's command
// ends, whether it succeeded or failed.
func TestConformanceOpenClawGroupFreedCapacityWakesSibling(t *testing.T) {
	t.Parallel()
	for _, fail := range []error{nil, errors.New("task blew up")} {
		g := ocGroup(t, 2)
		first := g.runFailing(context.Background(), fail, "", "cron-nested", "group")
		second := g.run(context.Background(), "", "cron-nested", "group")
		first.waitStarted(t)
		second.waitStarted(t)
		hook := g.queued(t, context.Background(), "", "group", "hook-dispatch", "group")
		if n := g.active("hook-dispatch"); n != 0 {
			t.Fatalf("hook active %d with the budget full", n)
		}
		first.release()
		if err := first.result(t); !errors.Is(err, fail) {
			t.Fatalf("first = %v, want %v", err, fail)
		}
		hook.waitStarted(t)
		hook.release()
		second.release()
		for _, k := range []*ocTask{hook, second} {
			if err := k.result(t); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestConformanceOpenClawGroupServesInArrivalOrder ports "command lane
// capacity groups > three-member arbitration is independent of member
// iteration order", "equal-priority group heads keep global sequence after
// clock rollback" and "a %s completion gives shared capacity to the older
// eligible sibling head" without its reservation (openclaw/openclaw,
// src/process/command-queue.capacity-groups.test.ts): the group's budget
// goes to the member command that queued first, whatever the members'
// order, the wall clock, or which member's command freed it. Ours orders a
// lane's waiters by arrival alone (no clock is read to order them), so a
// clock going back cannot reorder them.
func TestConformanceOpenClawGroupServesInArrivalOrder(t *testing.T) {
	t.Parallel()
	// Three members, budget 1: delivery queued before hook goes first.
	g := ocGroup(t, 1)
	blocker := g.run(context.Background(), "", "cron-nested", "group")
	blocker.waitStarted(t)
	delivery := g.queued(t, context.Background(), "", "group", "delivery-dispatch", "group")
	hook := g.queued(t, context.Background(), "", "group", "hook-dispatch", "group")
	blocker.release()
	if err := blocker.result(t); err != nil {
		t.Fatal(err)
	}
	delivery.waitStarted(t)
	hook.notStarted(t)
	if w := g.stats(t, "group").Waiters; w != 1 {
		t.Fatalf("group waiters %d, want the hook queued", w)
	}
	delivery.release()
	hook.waitStarted(t)
	hook.release()
	for _, k := range []*ocTask{delivery, hook} {
		if err := k.result(t); err != nil {
			t.Fatal(err)
		}
	}

	// Budget 2, held by two hooks; cron queues, then a third hook. A hook
	// that ends (well or not) hands its share to the older cron.
	for _, fail := range []error{nil, errors.New("expected hook failure")} {
		g := ocGroup(t, 2)
		h1 := g.runFailing(context.Background(), fail, "", "hook-dispatch", "group")
		h2 := g.run(context.Background(), "", "hook-dispatch", "group")
		h1.waitStarted(t)
		h2.waitStarted(t)
		cron := g.queued(t, context.Background(), "", "group", "cron-nested", "group")
		h3 := g.queued(t, context.Background(), "", "group", "hook-dispatch", "group")
		h1.release()
		if err := h1.result(t); !errors.Is(err, fail) {
			t.Fatalf("first hook = %v, want %v", err, fail)
		}
		cron.waitStarted(t)
		h3.notStarted(t)
		if a, w := g.active("hook-dispatch"), g.stats(t, "group").Waiters; a != 1 || w != 1 {
			t.Fatalf("hooks active %d, queued %d; want 1 and 1", a, w)
		}
		for _, k := range []*ocTask{cron, h2, h3} {
			k.release()
		}
		for _, k := range []*ocTask{cron, h2, h3} {
			if err := k.result(t); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestConformanceOpenClawLanesOutsideGroupUnconstrained ports "command lane
// capacity groups > lanes outside any group are unconstrained by it"
// (openclaw/openclaw, src/process/command-queue.capacity-groups.test.ts):
// with the group's budget used up, a lane that is not a member runs its
// full capacity.
func TestConformanceOpenClawLanesOutsideGroupUnconstrained(t *testing.T) {
	t.Parallel()
	g := ocGroup(t, 1).global(t, "unpooled", 4)
	member := g.run(context.Background(), "", "cron-nested", "group")
	member.waitStarted(t)
	var runs []*ocTask
	for range 4 {
		k := g.run(context.Background(), "", "unpooled")
		k.waitStarted(t)
		runs = append(runs, k)
	}
	if n := g.active("unpooled"); n != 4 {
		t.Fatalf("unpooled active %d, want 4", n)
	}
	for _, k := range append(runs, member) {
		k.release()
		if err := k.result(t); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConformanceOpenClawNestedAcquireDoesNotDeadlock ports "command lane
// capacity groups > rejects lanes that can be synchronously awaited"
// (openclaw/openclaw, src/process/command-queue.capacity-groups.test.ts):
// OpenClaw refuses, when a group is configured, lanes whose commands await
// one another, since waiting inside would deadlock. Ours catches the wait
// itself: a Do inside a Do for the same key and a lane it holds fails at
// once with ErrReentrant instead of waiting for its own caller; lanes taken
// in the canonical order keep two callers from waiting for each other in a
// cycle. (The check is per key: a nested call for another key on a full
// global lane would still wait; give such work a lane of its own.)
func TestConformanceOpenClawNestedAcquireDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	g := ocNew(t).scoped(t, "session").global(t, "main", 1)
	for _, lanes := range [][]string{{"session"}, {"main"}, {"session", "main"}} {
		err := doAll(g.q, context.Background(), "abc", lanes, func(ctx context.Context) error {
			return doAll(g.q, ctx, "abc", lanes, func(context.Context) error {
				t.Errorf("the nested command on %v ran", lanes)
				return nil
			})
		})
		if !errors.Is(err, lanequeue.ErrReentrant) {
			t.Fatalf("a nested Do on %v = %v, want ErrReentrant", lanes, err)
		}
	}
	if n := len(g.q.Holders()); n != 0 {
		t.Fatalf("%d holders left", n)
	}
}

// ocConv is a conversation key as OpenClaw's resolveConversationLane builds
// it from its parts, typed instead of joined into a string.
type ocConv struct{ Channel, Account, Peer string }

// TestConformanceOpenClawConversationKeys ports "resolveConversationLane >
// builds lane key from channel + accountId + peerId", "lowercases all
// parts", "trims whitespace", "defaults accountId to 'default'" and "returns
// empty string when both channel and peerId are missing"
// (openclaw/openclaw, src/agents/pi-embedded-runner/lanes.test.ts). A struct
// key needs no string building: the same conversation runs one at a time,
// conversations that differ in any part run at once. Ours differs: keys are
// compared as they are, with no lowercasing, trimming or defaults, so
// "Discord" and "discord" are two conversations; normalise the parts before
// building the key to fold them. The zero key is a key like any other (a
// command that needs no per-conversation order does not name the keyed
// lane).
func TestConformanceOpenClawConversationKeys(t *testing.T) {
	t.Parallel()
	q := lanequeue.New[ocConv]()
	defer q.Close()
	if err := addKeyed(q, "conv", keyedsem.WithIdleTimeout(0)); err != nil {
		t.Fatal(err)
	}
	lanes := []string{"conv"}
	convs := []ocConv{
		{"discord", "acct1", "C12345"},
		{"discord", "acct1", "C12346"},
		{"discord", "acct2", "C12345"},
		{"telegram", "acct1", "C12345"},
		{"Discord", "ACCT1", "c12345"},
		{"  discord  ", "acct1", "  C12345  "},
		{},
	}
	var held []*lanequeue.Ticket[ocConv]
	for _, c := range convs {
		tk, ok := tryAcquireAll(q, c, lanes)
		if !ok {
			t.Fatalf("conversation %+v was blocked by another one", c)
		}
		held = append(held, tk)
	}
	for _, c := range convs {
		if _, ok := tryAcquireAll(q, c, lanes); ok {
			t.Fatalf("conversation %+v ran twice at once", c)
		}
	}
	for _, tk := range held {
		tk.Release()
	}
	if st := q.Stats()[0]; st.Keys != 0 || st.Held != 0 {
		t.Fatalf("after the conversations: %+v", st)
	}
}

// TestConformanceOpenClawAbortBeforeReleaseWinsRace ports the ordering of
// "command queue > rejects queued task when abortSignal fires while
// waiting" and "abort removes only the targeted entry from the queue"
// (openclaw/openclaw, src/process/command-queue.test.ts), where
// controller.abort() runs before the blocker is resolved: the aborted
// command must be rejected, never run, even though the lane comes free right
// after the abort. Here the cancel happens before the release without
// waiting in between, on a keyed and on a global lane, for many rounds: the
// grant and the cancellation then race inside the lanes, and the
// cancellation, which happened first, must win (issue 11, defect 1).
func TestConformanceOpenClawAbortBeforeReleaseWinsRace(t *testing.T) {
	t.Parallel()
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	g := ocNew(t).scoped(t, "session").global(t, "main", 1)
	for _, lane := range []string{"session", "main"} {
		for round := range rounds {
			first := g.run(context.Background(), "k", lane)
			first.waitStarted(t)
			ctx, cancel := context.WithCancel(context.Background())
			second := g.queued(t, ctx, "k", lane, lane)
			cancel()
			first.release()
			select {
			case <-second.started:
				second.release()
				t.Fatalf("%s, round %d: a command aborted before the lane came free ran (Do returned %v)", lane, round, second.result(t))
			case err := <-second.done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("%s, round %d: a command aborted before the lane came free returned %v, want context.Canceled", lane, round, err)
				}
			case <-time.After(testkit.Deadline):
				t.Fatalf("%s, round %d: the aborted command did not return", lane, round)
			}
			if err := first.result(t); err != nil {
				t.Fatal(err)
			}
			if st := g.stats(t, lane); st.Held != 0 || st.Waiters != 0 {
				t.Fatalf("%s, round %d: %+v after both ended", lane, round, st)
			}
		}
	}
}
