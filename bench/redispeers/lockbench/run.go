package lockbench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// Config is the workload of one run, the same for every lock.
type Config struct {
	Addr       string        // redis-server address
	Key        string        // the one key every contender locks; a fresh one per run
	Groups     int           // groups of contenders (processes, in cmd/lockbench)
	Contenders int           // contenders per group
	Hold       time.Duration // how long a holder keeps the lock
	TTL        time.Duration // lease or expiry of the lock
	Duration   time.Duration // how long the contenders run
}

func (c Config) check() error {
	if c.Addr == "" || c.Key == "" || c.Groups < 1 || c.Contenders < 1 || c.Hold < 0 || c.TTL <= 0 || c.Duration <= 0 {
		return fmt.Errorf("lockbench: bad config %+v", c)
	}
	return nil
}

// Grant is one hold, in nanoseconds of [Now].
type Grant struct {
	Start int64 `json:"s"` // the lock call returned
	End   int64 `json:"e"` // the unlock call, or the end of the promised validity if earlier
	Wait  int64 `json:"w"` // from the lock call to its return
}

// GroupReport is what one group logged during a run.
type GroupReport struct {
	Grants       []Grant `json:"grants"`
	Calls        int64   `json:"calls"`         // Redis commands sent by the group's client during the run
	Errors       int     `json:"errors"`        // lock calls that failed before the run's end
	FirstError   string  `json:"first_error"`   // the first of them
	Pending      []int64 `json:"pending"`       // waits still going on at the run's end, ns
	NeverGranted int     `json:"never_granted"` // contenders that got no grant in the whole run
	LeaseEnded   int     `json:"lease_ended"`   // holds that outlived the validity the lock promised
}

// Group is one group of contenders: its own go-redis client (with a hook
// that counts the commands it sends) and its own lock instance.
type Group struct {
	cfg   Config
	rc    *redis.Client
	calls *redistest.Calls
	lk    Locker
}

// NewGroup connects a group to cfg.Addr, makes its lock instance and warms
// it up with one lock and unlock (scripts loaded, connections open) before
// any clock starts.
func NewGroup(im Impl, cfg Config) (*Group, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rc := redis.NewClient(&redis.Options{
		Addr:                  cfg.Addr,
		DisableIdentity:       true,
		PoolSize:              cfg.Contenders + 4, // a connection for every contender's call, the same for every lock
		ContextTimeoutEnabled: true,
	})
	cc := &redistest.Calls{}
	rc.AddHook(cc)
	lk, err := im.New(rc, cfg)
	if err != nil {
		_ = rc.Close()
		return nil, err
	}
	g := &Group{cfg: cfg, rc: rc, calls: cc, lk: lk}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := lk.Lock(ctx)
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("lockbench: %s: warm-up lock: %w", im.Name, err)
	}
	h.Unlock()
	return g, nil
}

// Close closes the group's lock instance and client.
func (g *Group) Close() {
	g.lk.Close()
	_ = g.rc.Close()
}

// Run runs the group's contenders for cfg.Duration and returns their log.
func (g *Group) Run() GroupReport {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.Duration)
	defer cancel()
	calls0 := g.calls.Commands()
	var (
		mu  sync.Mutex // protects rep
		rep GroupReport
		wg  sync.WaitGroup
	)
	for range g.cfg.Contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local GroupReport
			for ctx.Err() == nil {
				t0 := Now()
				h, err := g.lk.Lock(ctx)
				t1 := Now()
				if err != nil {
					if ctx.Err() != nil {
						local.Pending = append(local.Pending, t1-t0)
						break
					}
					if local.Errors == 0 {
						local.FirstError = err.Error()
					}
					local.Errors++
					time.Sleep(time.Millisecond) // a lock that fails at once must not spin
					continue
				}
				time.Sleep(g.cfg.Hold) // the work the lock protects
				end := Now()
				if until := h.ValidUntil(); !until.IsZero() {
					if left := time.Until(until); left < 0 {
						end += int64(left)
						local.LeaseEnded++
					}
				}
				h.Unlock()
				local.Grants = append(local.Grants, Grant{Start: t1, End: end, Wait: t1 - t0})
			}
			mu.Lock()
			rep.Grants = append(rep.Grants, local.Grants...)
			rep.Pending = append(rep.Pending, local.Pending...)
			if rep.Errors == 0 {
				rep.FirstError = local.FirstError
			}
			rep.Errors += local.Errors
			rep.LeaseEnded += local.LeaseEnded
			if len(local.Grants) == 0 {
				rep.NeverGranted++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	rep.Calls = g.calls.Commands() - calls0
	return rep
}

// RunInProcess runs cfg.Groups groups of im in this process at once, and
// summarises their logs.
func RunInProcess(im Impl, cfg Config) (Result, error) {
	groups := make([]*Group, 0, cfg.Groups)
	defer func() {
		for _, g := range groups {
			g.Close()
		}
	}()
	for range cfg.Groups {
		g, err := NewGroup(im, cfg)
		if err != nil {
			return Result{}, err
		}
		groups = append(groups, g)
	}
	reps := make([]GroupReport, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() { defer wg.Done(); reps[i] = g.Run() }()
	}
	wg.Wait()
	return Summarize(im, cfg, reps), nil
}

// Result is the summary of one lock's run.
type Result struct {
	Impl, Settings string
	Config         Config
	Grants         int
	PerSec         float64       // grants per second
	WaitP50        time.Duration // of the waits that ended in a grant
	WaitP99        time.Duration
	Longest        time.Duration // the longest wait, counting those still going on at the end
	CallsPerGrant  float64       // Redis commands sent by all groups, per grant
	MostInUse      int           // the oracle: most holders at once
	NeverGranted   int           // contenders that got no grant in the whole run
	Errors         int
	FirstError     string
	LeaseEnded     int
}

// Exclusive reports whether the oracle saw at most one holder at a time.
func (r Result) Exclusive() bool { return r.MostInUse <= 1 }

// Summarize merges the groups' logs of one run of im.
func Summarize(im Impl, cfg Config, reps []GroupReport) Result {
	r := Result{Impl: im.Name, Settings: im.Settings, Config: cfg}
	var spans []Span
	var waits []int64
	var calls int64
	longest := int64(0)
	for _, g := range reps {
		for _, gr := range g.Grants {
			spans = append(spans, Span{Start: gr.Start, End: gr.End})
			waits = append(waits, gr.Wait)
		}
		for _, p := range g.Pending {
			longest = max(longest, p)
		}
		calls += g.Calls
		if r.Errors == 0 && g.Errors > 0 {
			r.FirstError = g.FirstError
		}
		r.Errors += g.Errors
		r.NeverGranted += g.NeverGranted
		r.LeaseEnded += g.LeaseEnded
	}
	r.Grants = len(waits)
	r.PerSec = float64(r.Grants) / cfg.Duration.Seconds()
	r.MostInUse = MostInUse(spans)
	if len(waits) > 0 {
		slices.Sort(waits)
		r.WaitP50 = time.Duration(redistest.Percentile(waits, 0.50))
		r.WaitP99 = time.Duration(redistest.Percentile(waits, 0.99))
		longest = max(longest, waits[len(waits)-1])
		r.CallsPerGrant = float64(calls) / float64(len(waits))
	}
	r.Longest = time.Duration(longest)
	return r
}
