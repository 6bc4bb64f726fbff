package lockbench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/redislane"
)

// Locker is one lock instance of one group (one process of a fleet), on the
// run's key. Lock must be safe for concurrent use by the group's contenders.
type Locker interface {
	// Lock waits until the lock is held or ctx ends; on failure nothing is held.
	Lock(ctx context.Context) (Held, error)
	// Close ends the instance once its holds are released.
	Close()
}

// Held is a lock that is held.
type Held interface {
	// ValidUntil is the end of the validity the lock promises its holder
	// (its lease as last extended), in the local clock of time.Now.
	ValidUntil() time.Time
	// Unlock releases the lock.
	Unlock()
}

// Impl is one lock implementation and its settings.
type Impl struct {
	Name     string // as in the table and the -impls flag
	Settings string // how it is configured, for the table
	// New makes a group's instance on rc, for the key cfg.Key.
	New func(rc *redis.Client, cfg Config) (Locker, error)
}

// Impls returns the locks compared, in the order they run: lanes' Keyed and
// the peers, each with the run's TTL as its lease or expiry.
//
// redsync waits 50-250 ms (random) between tries by default and gives up
// after 32; here it never gives up (its LockContext stops when the context
// ends), once with the default delays and once retrying every 10 ms, the
// hold. redislock does not retry unless told; here once every 10 ms and once
// with its exponential backoff from 16 ms (the minimum its docs recommend)
// up to 256 ms. A fresh retry strategy is made for every Obtain: redislock's
// exponential backoff counts its retries inside the strategy value.
func Impls() []Impl {
	return []Impl{
		{Name: "lanes", Settings: "redislane.Keyed, per-key capacity 1", New: newLanes},
		{Name: "redsync", Settings: "retry delay 50-250 ms (default), unlimited tries", New: newRedsync(0)},
		{Name: "redsync-10ms", Settings: "retry delay 10 ms, unlimited tries", New: newRedsync(10 * time.Millisecond)},
		{Name: "redislock-10ms", Settings: "LinearBackoff(10 ms)", New: newRedislock(func() redislock.RetryStrategy {
			return redislock.LinearBackoff(10 * time.Millisecond)
		})},
		{Name: "redislock-exp", Settings: "ExponentialBackoff(16 ms, 256 ms)", New: newRedislock(func() redislock.RetryStrategy {
			return redislock.ExponentialBackoff(16*time.Millisecond, 256*time.Millisecond)
		})},
	}
}

// ImplByName returns the Impl of Impls named name.
func ImplByName(name string) (Impl, error) {
	for _, im := range Impls() {
		if im.Name == name {
			return im, nil
		}
	}
	return Impl{}, fmt.Errorf("lockbench: no lock named %q", name)
}

// lanes: one Keyed instance per group; the run's key is the lane's name and
// every contender asks for the same key in it.
type lanesLocker struct{ k *redislane.Keyed }

func newLanes(rc *redis.Client, cfg Config) (Locker, error) {
	// The quarantine (a new lane grants nothing for one lease, as it cannot
	// be told from one whose Redis lost its state) is 0: the run's server
	// and its key are new, so no holder can predate them.
	k, err := redislane.NewKeyed(rc, cfg.Key, 1, redislane.WithLease(cfg.TTL), redislane.WithQuarantine(0))
	if err != nil {
		return nil, err
	}
	return lanesLocker{k}, nil
}

func (l lanesLocker) Lock(ctx context.Context) (Held, error) {
	p, err := l.k.Acquire(ctx, "k")
	if err != nil {
		return nil, err
	}
	return lanesHeld{p}, nil
}

func (l lanesLocker) Close() { l.k.Close() }

type lanesHeld struct{ p *redislane.Permit }

func (h lanesHeld) ValidUntil() time.Time { return h.p.Deadline() }
func (h lanesHeld) Unlock()               { h.p.Release() }

// redsync: one Redsync per group, a Mutex per lock call (a Mutex keeps the
// value and validity of its last lock, so concurrent calls need their own).
type redsyncLocker struct {
	rs   *redsync.Redsync
	key  string
	opts []redsync.Option
}

func newRedsync(delay time.Duration) func(*redis.Client, Config) (Locker, error) {
	return func(rc *redis.Client, cfg Config) (Locker, error) {
		opts := []redsync.Option{redsync.WithExpiry(cfg.TTL), redsync.WithTries(math.MaxInt32)}
		if delay > 0 {
			opts = append(opts, redsync.WithRetryDelay(delay))
		}
		return &redsyncLocker{rs: redsync.New(redsyncgoredis.NewPool(rc)), key: cfg.Key, opts: opts}, nil
	}
}

func (l *redsyncLocker) Lock(ctx context.Context) (Held, error) {
	m := l.rs.NewMutex(l.key, l.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return redsyncHeld{m}, nil
}

func (l *redsyncLocker) Close() {}

type redsyncHeld struct{ m *redsync.Mutex }

func (h redsyncHeld) ValidUntil() time.Time { return h.m.Until() }
func (h redsyncHeld) Unlock()               { _, _ = h.m.Unlock() }

// redislock: one Client per group.
type redislockLocker struct {
	c     *redislock.Client
	key   string
	ttl   time.Duration
	retry func() redislock.RetryStrategy
}

func newRedislock(retry func() redislock.RetryStrategy) func(*redis.Client, Config) (Locker, error) {
	return func(rc *redis.Client, cfg Config) (Locker, error) {
		return &redislockLocker{c: redislock.New(rc), key: cfg.Key, ttl: cfg.TTL, retry: retry}, nil
	}
}

func (l *redislockLocker) Lock(ctx context.Context) (Held, error) {
	lk, err := l.c.Obtain(ctx, l.key, l.ttl, &redislock.Options{RetryStrategy: l.retry()})
	if err != nil {
		return nil, err
	}
	// redislock does not say when the lock was set; it was set before
	// Obtain returned, so now + TTL is no earlier than its expiry (the
	// oracle errs towards seeing an overlap).
	return redislockHeld{lk, time.Now().Add(l.ttl)}, nil
}

func (l *redislockLocker) Close() {}

type redislockHeld struct {
	lk    *redislock.Lock
	until time.Time
}

func (h redislockHeld) ValidUntil() time.Time { return h.until }
func (h redislockHeld) Unlock()               { _ = h.lk.Release(context.Background()) }
