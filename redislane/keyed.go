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
// cancellation. A fleet key's line is FIFO, or, on a Keyed made
// [WithSequenceOrder], in the order of [semaphore.Sequence] (see the
// package documentation); any other per-call option that sets something
// (a priority, a group, a lane's weight, a sequence on a FIFO Keyed or one
// beyond ±2^53) is refused with an error wrapping [ErrInvalidConfig], and
// nothing is taken.
func (k *Keyed) Acquire(ctx context.Context, key string, opts ...semaphore.AcquireOption) (*Permit, error) {
	n, num, err := k.callOf(opts)
	if err != nil {
		return nil, err
	}
	return k.c.acquireAt(ctx, key, n, place{num: num})
}

// TryAcquire takes permits of key, one or [semaphore.Weight](n), if Redis
// grants them at once; see [Weighted.TryAcquire]. Options are read as
// Acquire reads them (a refused one: false); a number that the reorder
// hold would hold back gets false.
func (k *Keyed) TryAcquire(key string, opts ...semaphore.AcquireOption) (*Permit, bool) {
	n, num, err := k.callOf(opts)
	if err != nil {
		return nil, false
	}
	return k.c.tryAcquireAt(key, n, place{num: num})
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

// callOf reads a Keyed call's options: its weight (1 unless
// semaphore.Weight says otherwise) and, on a Keyed made
// WithSequenceOrder, its number (0: none); any option that sets something
// else is refused.
func (k *Keyed) callOf(opts []semaphore.AcquireOption) (n, num int64, err error) {
	if len(opts) == 0 {
		return 1, 0, nil
	}
	c, bad := call.Read(opts)
	t := c.Turn
	if k.c.seq != nil {
		num, t.Sequence = t.Sequence, 0
	}
	if bad != call.BadNone || t != (call.Turn{}) || c.LaneWeight || c.Lenient {
		if k.c.seq != nil {
			return 0, 0, errSeqOptions
		}
		return 0, 0, errKeyedOptions
	}
	if num > maxSequence || num < -maxSequence {
		return 0, 0, errSeqRange
	}
	n = 1
	if c.WeightSet {
		n = c.Weight
	}
	return n, num, nil
}

// errKeyedOptions refuses the per-call options a fleet key cannot honour.
var (
	errKeyedOptions = fmt.Errorf("redislane: a fleet key's line is FIFO (unless WithSequenceOrder): it takes semaphore.Weight and no other per-call option: %w", ErrInvalidConfig)
	errSeqOptions   = fmt.Errorf("redislane: a sequenced fleet key takes semaphore.Weight and semaphore.Sequence, and no other per-call option: %w", ErrInvalidConfig)
)

// Capacity returns the per-key capacity.
func (k *Keyed) Capacity() int64 { return k.c.capacity }

// Name returns the lane's name.
func (k *Keyed) Name() string { return k.c.name }

// Stats returns a snapshot of this instance.
func (k *Keyed) Stats() Stats { return k.c.stats() }

// Close behaves as [Weighted.Close].
func (k *Keyed) Close() { k.c.close() }
