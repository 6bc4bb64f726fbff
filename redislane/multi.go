package redislane

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Request names n permits of one lane (of one key of a Keyed) for
// [TryAcquireAll]. Make it with [Weighted.Request] or [Keyed.Request]; the
// zero Request is refused.
type Request struct {
	c   *core
	key string
	n   int64
	err error // a lane that cannot take part: why
}

// Request returns a request of n permits of the lane for [TryAcquireAll].
// A lane made [WithQuota], [WithPriorities] or [WithFairShare] cannot take
// part (TryAcquireAll refuses it with an error wrapping
// [ErrInvalidConfig]).
func (s *Weighted) Request(n int64) Request {
	r := Request{c: s.c, n: n}
	switch {
	case s.q != nil:
		r.err = fmt.Errorf("%w: lane %q: a lane made WithQuota grants from local blocks: it cannot take part in TryAcquireAll", ErrInvalidConfig, s.c.name)
	case s.c.ord != nil:
		r.err = fmt.Errorf("%w: lane %q: a lane made WithPriorities or WithFairShare cannot take part in TryAcquireAll", ErrInvalidConfig, s.c.name)
	}
	return r
}

// Request returns a request of n permits of key for [TryAcquireAll]. A
// Keyed made [WithSequenceOrder] cannot take part (TryAcquireAll refuses
// it with an error wrapping [ErrInvalidConfig]).
func (k *Keyed) Request(key string, n int64) Request {
	r := Request{c: k.c, key: key, n: n}
	if k.c.seq != nil {
		r.err = fmt.Errorf("%w: lane %q: a Keyed made WithSequenceOrder cannot take part in TryAcquireAll", ErrInvalidConfig, k.c.name)
	}
	return r
}

// slotTag is the hash tag of the lane's keys: what Redis Cluster hashes
// to find their slot.
func (c *core) slotTag() string {
	if c.cfg.hashTagSet {
		return "lanes:" + c.cfg.hashTag
	}
	return "lanes:" + c.name
}

// TryAcquireAll takes the permits of every request, or none, in one
// Redis call, without waiting; see the package doc, "Keys and Cluster
// slots", for what it checks and the hash-tag rule. It returns the
// permits in the order of reqs, each an ordinary permit of its lane
// (release each one), or false with nothing held or queued.
//
// It returns an error, without a call, for requests that cannot go in
// one call: lanes with different hash tags on a client other than a
// *redis.Client, lanes on different clients, two requests of one bucket
// (the same Weighted, or the same key of a Keyed), no request, or a lane
// that cannot take part (see [Weighted.Request], [Keyed.Request]), each
// wrapping [ErrInvalidConfig]; a weight below 1 returns
// [ErrInvalidWeight], one above its lane's capacity [ErrTooHeavy]. After
// the call, a lane whose capacity or kind in Redis differ returns
// [ErrCapacityMismatch], a weight above a fleet lane's limit now
// [ErrTooHeavy]. A
// failed call, a reply later than the smallest margin of the lanes (a
// fifth of the lease), or a lane closed meanwhile returns false, and what
// the call may have granted is given back in the background.
func TryAcquireAll(reqs ...Request) ([]*Permit, bool, error) {
	if err := checkRequests(reqs); err != nil {
		return nil, false, err
	}
	ps, _, err := tryAll(reqs, -1, nil)
	return ps, ps != nil, err
}

// AcquireAll takes the permits of every request, all or none, waiting
// until it can or ctx ends; see the package doc, "Keys and Cluster
// slots". It tries them all at once as [TryAcquireAll] does; when a lane
// refuses, it waits for that lane alone, in its queue (holding nothing
// else), and, once granted there, tries the others all at once again
// with that permit kept: granted, it returns them all; refused, it gives
// the permit back and waits on the lane that refused now. It returns the
// errors of [TryAcquireAll] for the same requests, and those of an
// Acquire of the lane it waits on (ctx's error, [ErrClosed], ...), with
// nothing held.
//
// The permit it waits for is held alone for the one call that tries the
// others, and is given back if they refuse: a caller whose lanes are each
// busy by turns may wait long, as it keeps no place in a lane's queue
// while it waits on another.
func AcquireAll(ctx context.Context, reqs ...Request) ([]*Permit, error) {
	if err := checkRequests(reqs); err != nil {
		return nil, err
	}
	wait, backoff := -1, time.Duration(0)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, r := range reqs {
			if r.c.isClosed() {
				return nil, ErrClosed
			}
		}
		var held *Permit
		if wait >= 0 {
			r := reqs[wait]
			p, err := r.c.acquire(ctx, r.key, r.n)
			if err != nil {
				return nil, err
			}
			held = p
		}
		ps, refusedAt, err := tryAll(reqs, wait, held)
		switch {
		case err != nil:
			if held != nil {
				held.Release()
			}
			return nil, err
		case ps != nil:
			return ps, nil
		}
		if held != nil {
			held.Release()
		}
		if refusedAt >= 0 && refusedAt != wait {
			wait, backoff = refusedAt, 0
			continue
		}
		// No lane to wait on (a failed call, a lane closed, a reply too
		// late), or the permit waited for was lost: back off, try again.
		backoff = nextBackoff(backoff)
		reqs[0].c.pause(ctx, jitter(backoff)) // ctx's end and Close are seen above
		wait = -1
	}
}

// tryAll makes the call of TryAcquireAll for reqs, checked. If keep >= 0,
// reqs[keep] is held already, by held: the call keeps it (it fails if its
// lease is gone) rather than grant it. It returns the permits, or nil and
// the index of the request that a lane refused (-1: none, e.g. a failed
// call), or an error for a lane that can never grant its request (the
// stored capacity or kind differ, or the weight is above a fleet lane's
// limit now). On nil, only held is held.
func tryAll(reqs []Request, keep int, held *Permit) ([]*Permit, int, error) {
	// Count as a waiter on every lane, so that Close waits for the call;
	// refuse if a lane is closed or a caller of this instance waits on a
	// request's bucket (never overtake a local waiter).
	entered := 0
	defer func() {
		for _, r := range reqs[:entered] {
			r.c.mu.Lock()
			r.c.nwait--
			r.c.drainedLocked()
			r.c.mu.Unlock()
		}
	}()
	for i, r := range reqs {
		r.c.mu.Lock()
		if r.c.closed {
			r.c.mu.Unlock()
			return nil, -1, nil
		}
		if i != keep && r.c.lines[r.key] != nil {
			r.c.mu.Unlock()
			return nil, i, nil
		}
		r.c.nwait++
		r.c.mu.Unlock()
		entered++
	}

	ctx := context.Background()
	margin := reqs[0].c.cfg.margin()
	for _, r := range reqs {
		var cancel context.CancelFunc
		ctx, cancel = r.c.callCtx(ctx, r.c.cfg.margin())
		defer cancel()
		margin = min(margin, r.c.cfg.margin())
	}
	keys := make([]string, 0, 5*len(reqs))
	args := make([]any, 0, 10*len(reqs))
	rks := make([][4]string, len(reqs))
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		pub, err := r.c.pubCmd(ctx)
		if err != nil {
			return nil, -1, nil
		}
		rks[i], ids[i] = r.c.bucketKeys(r.key), newID()
		if i == keep {
			ids[i] = held.id
		}
		keys = append(keys, r.c.metaKey)
		keys = append(keys, rks[i][:]...)
		limit, lterm := r.c.limitAndTerm()
		args = append(args, ids[i], r.n, limit, r.c.kindName(), ms(r.c.cfg.lease), ms(r.c.cfg.quarantine), lterm, r.c.channel, pub, flag(i == keep))
	}
	cleanup := func() {
		for i, r := range reqs {
			if i != keep {
				r.c.cleanupAsync(rks[i], ids[i])
			}
		}
	}
	sent := time.Now()
	v, err := multiScript.Run(ctx, reqs[0].c.client, keys, args...).Int64Slice()
	switch {
	case err == nil && len(v) > 0 && v[0] == stGranted && len(v) != 1+len(reqs):
		err = fmt.Errorf("%w: acquire-all script returned %d fences for %d requests", errBadReply, len(v)-1, len(reqs))
	case err == nil && (len(v) < 2 || v[0] != stGranted && (len(v) < 3 || v[1] < 1 || v[1] > int64(len(reqs)))):
		err = fmt.Errorf("%w: acquire-all script returned %v", errBadReply, v)
	}
	switch {
	case err != nil:
		for _, r := range reqs {
			r.c.st.redisErrs.Add(1)
		}
		cleanup() // the outcome is unknown
		return nil, -1, nil
	case v[0] == stMismatch:
		r := reqs[v[1]-1]
		return nil, -1, mismatchError(r.c.name, "capacity", v[2], r.c.kindName(), r.c.capacity)
	case v[0] == stTooHeavy:
		r := reqs[v[1]-1]
		return nil, -1, r.c.tooHeavyNow(r.n, v[2])
	case v[0] != stGranted:
		return nil, int(v[1]) - 1, nil
	case time.Since(sent) > margin:
		for _, r := range reqs {
			r.c.st.late.Add(1)
		}
		cleanup()
		return nil, -1, nil
	}
	ps := make([]*Permit, len(reqs))
	all := true
	for i, r := range reqs {
		if i == keep {
			ps[i] = held
			continue
		}
		// grant releases the id itself if its lane closed meanwhile
		ps[i] = r.c.grant(rks[i], ids[i], r.n, v[1+i], sent)
		all = all && ps[i] != nil
	}
	if !all {
		for i, p := range ps {
			if p != nil && i != keep {
				p.Release()
			}
		}
		return nil, -1, nil
	}
	for i, r := range reqs {
		if i != keep {
			r.c.grantedAtOnce()
		}
	}
	return ps, -1, nil
}

// checkRequests returns why reqs cannot go together in one call, or nil.
func checkRequests(reqs []Request) error {
	if len(reqs) == 0 {
		return fmt.Errorf("%w: TryAcquireAll without a request", ErrInvalidConfig)
	}
	// A bucket is named by its keys in Redis, not by the lane's value:
	// two values made with one name on one client are one lane, and two
	// requests of it in one call would each be checked against the room
	// the other takes.
	seen := make(map[string]bool, len(reqs))
	first := reqs[0].c
	for i, r := range reqs {
		switch {
		case r.c == nil:
			return fmt.Errorf("%w: request %d is the zero Request (make it with Weighted.Request or Keyed.Request)", ErrInvalidConfig, i)
		case r.err != nil:
			return r.err
		case r.n <= 0:
			return ErrInvalidWeight
		case r.n > r.c.limit():
			return ErrTooHeavy
		case seen[r.c.bucketKeys(r.key)[0]]:
			return fmt.Errorf("%w: lane %q, key %q: two requests of one bucket (ask for their sum in one)", ErrInvalidConfig, r.c.name, r.key)
		case r.c.client != first.client:
			return fmt.Errorf("%w: lanes %q and %q use different Redis clients: one script call needs one", ErrInvalidConfig, first.name, r.c.name)
		case !singleServer(first.client) && r.c.slotTag() != first.slotTag():
			return fmt.Errorf("%w: lanes %q and %q have different hash tags ({%s}, {%s}): on a Cluster their keys may be on different slots; "+
				"make both WithHashTag with one tag", ErrInvalidConfig, first.name, r.c.name, first.slotTag(), r.c.slotTag())
		}
		seen[r.c.bucketKeys(r.key)[0]] = true
	}
	return nil
}

// singleServer tells a client whose every key is on one server: a plain
// (or failover) client. A Cluster, a Ring or a wrapper may spread keys by
// slot.
func singleServer(client redis.UniversalClient) bool {
	_, ok := client.(*redis.Client)
	return ok
}

// multiScript grants every request, or none (see TryAcquireAll). Each
// lane is read as the acquire script reads it (meta, look) and its queue
// is handed what is free (pump); then every request is checked as a
// TryAcquire would be (the lane open, nobody queued, the weight fits),
// and only if all pass are they granted. Requests of one lane (two keys
// of a Keyed) share its meta and fencing counter; a request whose lane
// asks the same meta record for another capacity or kind (a Keyed and a
// Weighted of one name) is a mismatch, as the first would be.
//
// KEYS: per request: meta, h, q, x, d
// ARGV: per request: id, weight, limit, kind, lease ms, quarantine ms,
// term of the limit (lterm), channel, publish command, held (0/1: id holds
// the request already, granted by an acquire: it is kept, with a fresh
// lease, if its lease has not run out, and refused otherwise)
//
// It replies {1, fence of each request}, {0, number of the request
// refused (from 1), hint ms}, {-1, number, stored limit} for a lane of
// another capacity or kind, or {-2, number, stored limit} for a weight
// above a fleet lane's limit now.
var multiScript = redis.NewScript(multiSrc)

const multiSrc = prelude + `
local n = #ARGV / 10
local Ms, rs = {}, {}
for i = 1, n do
  local a, k = 10 * (i - 1), 5 * (i - 1)
  local r = {id = ARGV[a + 1], w = tonumber(ARGV[a + 2]), ttl = tonumber(ARGV[a + 5]), chan = ARGV[a + 8], pub = ARGV[a + 9], held = ARGV[a + 10] == '1'}
  local mk = KEYS[k + 1]
  local M = Ms[mk]
  if not M then
    M = meta(mk, tonumber(ARGV[a + 3]), ARGV[a + 4], r.ttl, tonumber(ARGV[a + 6]), 0, tonumber(ARGV[a + 7]) or 0)
    M.asked = {ARGV[a + 3], ARGV[a + 4]}
    Ms[mk] = M
  elseif M.asked[2] ~= ARGV[a + 4] or (not isfleet(ARGV[a + 4]) and M.asked[1] ~= ARGV[a + 3]) then
    -- another request on this meta record, of a lane of another
    -- capacity or kind (a Keyed beside a Weighted of its name): the
    -- record holds one of them only
    return {-1, i, M.limit}
  end
  if not M.ok then return {-1, i, M.limit} end
  r.M, r.B = M, bucket(k + 2, M.ml)
  rs[i] = r
end
local function finish(out)
  for _, r in ipairs(rs) do flush(r.B) end
  for _, M in pairs(Ms) do save(M) end
  return out
end
for _, r in ipairs(rs) do
  look(r.B)
  pump(r.B, r.M, r.chan, r.pub)
end
for i, r in ipairs(rs) do
  local M, B = r.M, r.B
  if r.held then
    -- held by the caller already: kept, if its lease has not run out
    local exp = redis.call('ZSCORE', B.h, r.id)
    if not exp or tonumber(exp) <= now then return finish({0, i, 0}) end
  else
    if r.w > M.limit then return finish({-2, i, M.limit}) end
    if shut(M) then return finish({0, i, reopen(M) - now}) end
    if B.head or B.held + r.w > M.limit then
      return finish({0, i, (B.first or now + r.ttl) - now})
    end
  end
end
local out = {1}
for _, r in ipairs(rs) do
  if r.held then
    extend(r.B, r.B.h, r.id, r.ttl)
    out[#out + 1] = tonumber(redis.call('HGET', r.B.d, 'f:' .. r.id))
  else
    out[#out + 1] = grant(r.B, r.M, r.id, r.w, r.ttl)
  end
end
return finish(out)
`
