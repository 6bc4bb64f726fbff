//go:build unix

package redislane_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// The multi-process tests start copies of the test binary that run only
// TestHelperProcess, with their role and parameters in the environment, and
// report on their standard output, one JSON event a line.

type event struct {
	Ev     string `json:"ev"`
	Fence  int64  `json:"fence,omitempty"`
	Start  int64  `json:"start,omitempty"`
	End    int64  `json:"end,omitempty"`
	W      int64  `json:"w,omitempty"`
	Cause  string `json:"cause,omitempty"`
	Spans  []span `json:"spans,omitempty"`
	Errors int    `json:"errors,omitempty"`
	Err    string `json:"err,omitempty"`
}

type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan event
	done   chan struct{}
}

// startChild runs the test binary as a helper process with role and env.
func startChild(t *testing.T, role string, env map[string]string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), helperEnv+"="+role)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{t: t, cmd: cmd, stdin: stdin, events: make(chan event, 16), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Ev != "" {
				c.events <- e
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		_ = cmd.Wait()
	})
	return c
}

// next returns the child's next event, failing the test after d.
func (c *child) next(d time.Duration) event {
	c.t.Helper()
	select {
	case e, ok := <-c.events:
		if !ok {
			c.t.Fatalf("helper process ended without reporting")
		}
		if e.Ev == "error" {
			c.t.Fatalf("helper process: %s", e.Err)
		}
		return e
	case <-time.After(d):
		c.t.Fatalf("no event from the helper process within %v", d)
	}
	return event{}
}

func (c *child) finish() {
	_ = c.stdin.Close()
	<-c.done
	require.NoError(c.t, c.cmd.Wait())
}

func envInt(k string) int64 {
	v, err := strconv.ParseInt(os.Getenv(k), 10, 64)
	if err != nil {
		panic(fmt.Sprintf("helper: env %s: %v", k, err))
	}
	return v
}

func envDur(k string) time.Duration {
	v, err := time.ParseDuration(os.Getenv(k))
	if err != nil {
		panic(fmt.Sprintf("helper: env %s: %v", k, err))
	}
	return v
}

func emit(e event) {
	b, _ := json.Marshal(e)
	os.Stdout.Write(append(b, '\n'))
}

// TestHelperProcess is the body of the helper processes; run directly, it
// does nothing.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		return
	}
	if err := runHelper(role); err != nil {
		emit(event{Ev: "error", Err: err.Error()})
		os.Exit(2)
	}
	os.Exit(0)
}

func runHelper(role string) error {
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv("RL_ADDR"), DisableIdentity: true, ContextTimeoutEnabled: true})
	defer rc.Close()
	s, err := redislane.NewWeighted(rc, os.Getenv("RL_NAME"), envInt("RL_LIMIT"),
		redislane.WithLease(envDur("RL_LEASE")), redislane.WithQuarantine(0))
	if err != nil {
		return err
	}
	defer s.Close()
	switch role {
	case "contend":
		return helperContend(s)
	case "hold":
		return helperHold(s)
	}
	return fmt.Errorf("unknown role %q", role)
}

// helperContend runs RL_GOROUTINES goroutines for RL_DURATION, each
// acquiring a random weight from 1 to RL_MAXW and holding it up to 3 ms,
// and reports every span.
func helperContend(s *redislane.Weighted) error {
	ctx, cancel := context.WithTimeout(context.Background(), envDur("RL_DURATION"))
	defer cancel()
	var o oracle
	var mu sync.Mutex
	errs := 0
	var wg sync.WaitGroup
	for range envInt("RL_GOROUTINES") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				w := 1 + rand.Int64N(envInt("RL_MAXW"))
				p, err := s.Acquire(ctx, w)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						errs++
						mu.Unlock()
					}
					continue
				}
				start := redistest.Now()
				hold := time.Duration(rand.Int64N(int64(3 * time.Millisecond)))
				time.Sleep(hold) // the work the permit protects
				o.add(span{Start: start, End: endOf(p.Deadline()), W: w, Fence: p.Fence()})
				p.Release()
			}
		}()
	}
	wg.Wait()
	emit(event{Ev: "spans", Spans: o.spans, Errors: errs})
	return nil
}

// startFullHolder starts a child process that takes the whole of lane
// name (capacity 2, weight 2, the given lease) and returns it with its
// "held" event.
func startFullHolder(t *testing.T, addr, name string, lease time.Duration) (*child, event) {
	t.Helper()
	env := helperEnvs(addr, name, 2, lease)
	env["RL_W"] = "2"
	kid := startChild(t, "hold", env)
	held := kid.next(time.Minute)
	require.Equal(t, "held", held.Ev)
	return kid, held
}

// helperHold acquires RL_W units, reports "held", waits for the permit's
// context to end or for its standard input to close, reports "ended" (with
// the cause, and when the lease ended) in the first case, and releases.
func helperHold(s *redislane.Weighted) error {
	p, err := s.Acquire(context.Background(), envInt("RL_W"))
	if err != nil {
		return err
	}
	start := redistest.Now()
	emit(event{Ev: "held", Fence: p.Fence(), Start: start, W: p.Weight()})
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-p.Context().Done():
		cause := context.Cause(p.Context())
		emit(event{Ev: "ended", Cause: cause.Error(), Start: start, End: endOf(p.Deadline()), Fence: p.Fence(), W: p.Weight()})
		<-stdinClosed
	case <-stdinClosed:
	}
	p.Release()
	return nil
}

func helperEnvs(addr, name string, limit int64, lease time.Duration) map[string]string {
	return map[string]string{
		"RL_ADDR": addr, "RL_NAME": name,
		"RL_LIMIT": strconv.FormatInt(limit, 10), "RL_LEASE": lease.String(),
	}
}

// Scenario 1: several processes, each with several goroutines, contending
// with weights 1 to 3. The merged spans never exceed the limit.
func TestFleetOfProcessesNeverExceedsCapacity(t *testing.T) {
	srv := startRedis(t)
	const limit = 5
	name := laneName(t)
	var kids []*child
	for range 3 {
		env := helperEnvs(srv.Addr, name, limit, time.Second)
		env["RL_GOROUTINES"], env["RL_MAXW"], env["RL_DURATION"] = "6", "3", "2s"
		kids = append(kids, startChild(t, "contend", env))
	}
	var all []span
	for _, k := range kids {
		e := k.next(time.Minute)
		require.Equal(t, "spans", e.Ev)
		assert.Zero(t, e.Errors, "acquire errors in a helper")
		assert.NotEmpty(t, e.Spans, "a helper was granted nothing")
		all = append(all, e.Spans...)
		k.finish()
	}
	t.Logf("%d grants over 3 processes", len(all))
	assert.LessOrEqual(t, maxInUse(all), int64(limit), "the oracle saw more weight in use than the limit")
	checkFences(t, all)

	rc := newClient(t, srv.Addr)
	ctx := context.Background()
	prefix := "{lanes:" + name + "}:g:"
	assert.Zero(t, rc.ZCard(ctx, prefix+"h").Val(), "holders left in Redis")
	assert.Zero(t, rc.ZCard(ctx, prefix+"q").Val(), "queued ids left in Redis")
}

// serverMillis returns the Redis server's clock in milliseconds.
func serverMillis(t *testing.T, rc *redis.Client) int64 {
	t.Helper()
	tm, err := rc.Time(context.Background()).Result()
	require.NoError(t, err)
	return tm.UnixMilli()
}

// Scenario 2: a holder process is killed with SIGKILL. Its units come back
// once its lease has run out, and not before: the next grant (its fencing
// token is the server's clock in microseconds) falls between the dead
// holder's expiry and one lease (plus a generous allowance for polling)
// after the kill.
func TestKilledHolderCapacityReturnsWithinOneLease(t *testing.T) {
	srv := startRedis(t)
	const lease = time.Second
	name := laneName(t)
	kid, held := startFullHolder(t, srv.Addr, name, lease)

	rc := newClient(t, srv.Addr)
	require.NoError(t, kid.cmd.Process.Signal(syscall.SIGKILL))
	killedAt := serverMillis(t, rc)
	holders, err := rc.ZRangeWithScores(context.Background(), "{lanes:"+name+"}:g:h", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, holders, 1, "the dead holder's entry")
	expiry := int64(holders[0].Score)

	s, err := redislane.NewWeighted(rc, name, 2, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*lease)
	defer cancel()
	p, err := s.Acquire(ctx, 2)
	require.NoError(t, err, "capacity never came back")
	defer p.Release()

	grantedAt := p.Fence() / 1000
	assert.Greater(t, p.Fence(), held.Fence)
	assert.GreaterOrEqual(t, grantedAt, expiry, "granted before the dead holder's lease ran out")
	assert.LessOrEqual(t, grantedAt-killedAt, (lease + time.Second).Milliseconds(),
		"capacity took longer than one lease (+1s allowance) to come back")
}

// Scenario 3: a holder process is stopped (SIGSTOP) for longer than its
// lease. Another process is granted the units after the lease ran out,
// with a higher fencing token; when the stopped process continues, its
// permit's context is cancelled with ErrLeaseExpired or ErrLeaseLost, and
// its lease ended (locally) before the new holder started.
func TestPausedHolderLosesLeaseAndNextFenceIsHigher(t *testing.T) {
	srv := startRedis(t)
	const lease = time.Second
	name := laneName(t)
	kid, held := startFullHolder(t, srv.Addr, name, lease)
	require.NoError(t, kid.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			_ = kid.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()

	rc := newClient(t, srv.Addr)
	s, err := redislane.NewWeighted(rc, name, 2, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*lease)
	defer cancel()
	p, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	mine := span{Start: redistest.Now(), W: 2, Fence: p.Fence()}
	assert.Greater(t, p.Fence(), held.Fence, "the next holder's fencing token must be higher")

	require.NoError(t, kid.cmd.Process.Signal(syscall.SIGCONT))
	stopped = false
	ended := kid.next(time.Minute)
	require.Equal(t, "ended", ended.Ev)
	assert.Contains(t, []string{redislane.ErrLeaseExpired.Error(), redislane.ErrLeaseLost.Error()}, ended.Cause)

	mine.End = endOf(p.Deadline())
	p.Release()
	old := span{Start: held.Start, End: ended.End, W: 2, Fence: held.Fence}
	assert.LessOrEqual(t, maxInUse([]span{old, mine}), int64(2),
		"the paused holder's lease ended after the next holder started")
	kid.finish()
}
