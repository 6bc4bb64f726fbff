package redislane

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/semaphore"
)

// Keyed is a semaphore per key, shared by every instance that uses the same
// Redis and the same name: with a per-key capacity of 1 (the usual case), the
// work of one key runs one at a time across the fleet, and different keys
// run in parallel. It is the distributed counterpart of keyedsem.
//
// A key costs nothing in Redis while nobody holds or waits for it: its keys
// expire two leases after their last use. All keys of a lane live in one
// Cluster slot (the lane's hash tag), so one lane is served by one Redis
// node. Close it to stop its goroutines.
//
// All methods are safe for concurrent use. As with [Weighted], every
// instance of one name must use the same per-key capacity (another capacity or
// kind fails with [ErrCapacityMismatch]) and should use the same lease (else
// see [WithQuarantine]), and the client must stay
// open until the lane is closed and its permits are released.
type Keyed struct {
	c *core
}

// NewKeyed returns the instance of the keyed lane name, with perKeyCapacity
// permits per key, on client. Like [NewWeighted], it makes no call to Redis
// and fails only for bad arguments (wrapping [ErrInvalidConfig]).
func NewKeyed(client redis.UniversalClient, name string, perKeyCapacity int64, opts ...Option) (*Keyed, error) {
	c, err := newCore(client, name, true, perKeyCapacity, opts)
	if err != nil {
		return nil, err
	}
	return &Keyed{c: c}, nil
}

// Acquire takes permits of key, one or [semaphore.Weight](n), waiting
// until they are free. It behaves as [Weighted.Acquire] for one key: one
// local line and one Redis queue per key, the same errors, the same
// cancellation. A fleet key's line is FIFO: any other per-call option that
// sets something (a priority, a sequence, a group, a lane's weight) is
// refused with an error wrapping [ErrInvalidConfig], and nothing is taken.
func (k *Keyed) Acquire(ctx context.Context, key string, opts ...semaphore.AcquireOption) (*Permit, error) {
	n, err := keyedWeight(opts)
	if err != nil {
		return nil, err
	}
	return k.c.acquire(ctx, key, n)
}

// TryAcquire takes permits of key, one or [semaphore.Weight](n), if Redis
// grants them at once; see [Weighted.TryAcquire]. Options are read as
// Acquire reads them (a refused one: false).
func (k *Keyed) TryAcquire(key string, opts ...semaphore.AcquireOption) (*Permit, bool) {
	n, err := keyedWeight(opts)
	if err != nil {
		return nil, false
	}
	return k.c.tryAcquire(key, n)
}

// Do acquires as Acquire does, runs fn, and releases when fn returns or
// panics; see [Weighted.Do].
func (k *Keyed) Do(ctx context.Context, key string, fn func(context.Context) error, opts ...semaphore.AcquireOption) error {
	p, err := k.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	return p.run(ctx, fn)
}

// keyedWeight reads a Keyed call's options: its weight (1 unless
// semaphore.Weight says otherwise); any option that sets something else
// is refused.
func keyedWeight(opts []semaphore.AcquireOption) (int64, error) {
	if len(opts) == 0 {
		return 1, nil
	}
	c, bad := call.Read(opts)
	if bad != call.BadNone || c.Turn != (call.Turn{}) || c.LaneWeight || c.Lenient {
		return 0, errKeyedOptions
	}
	if c.WeightSet {
		return c.Weight, nil
	}
	return 1, nil
}

// errKeyedOptions refuses the per-call options a fleet key cannot honour.
var errKeyedOptions = fmt.Errorf("redislane: a fleet key's line is FIFO: it takes semaphore.Weight and no other per-call option: %w", ErrInvalidConfig)

// Capacity returns the per-key capacity.
func (k *Keyed) Capacity() int64 { return k.c.capacity }

// Name returns the lane's name.
func (k *Keyed) Name() string { return k.c.name }

// Stats returns a snapshot of this instance.
func (k *Keyed) Stats() Stats { return k.c.stats() }

// Close behaves as [Weighted.Close].
func (k *Keyed) Close() { k.c.close() }
