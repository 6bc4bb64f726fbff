package redislane

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithSequenceOrder makes a [Keyed] serve each key's waiters, across the
// fleet, by ascending [semaphore.Sequence] number, then arrival, as
// keyedsem.WithSequenceOrder does in one process: see "Sequence order" in
// the package documentation. A [Weighted], a [Fleet] or a [Tokens] lane,
// which have no keys, refuse it (an error wrapping [ErrInvalidConfig]).
func WithSequenceOrder() Option { return func(c *config) { c.seqOrder = true } }

// WithReorderHold(d), with [WithSequenceOrder], holds back a numbered
// caller whose predecessor has not come, for at most d (1 ms or more),
// once the key has granted a number, as keyedsem.WithReorderHold does:
// see "Sequence order" in the package documentation.
func WithReorderHold(d time.Duration) Option {
	return func(c *config) { c.hold, c.holdSet = d, true }
}

// checkOrder is newConfig's check of the order options.
func (c config) checkOrder() error {
	switch {
	case c.holdSet && !c.seqOrder:
		return fmt.Errorf("redislane: WithReorderHold without WithSequenceOrder: %w", ErrInvalidConfig)
	case c.holdSet && c.hold < time.Millisecond:
		return fmt.Errorf("redislane: WithReorderHold(%v): must be 1ms or more (the resolution of the lane's timers): %w", c.hold, ErrInvalidConfig)
	}
	return nil
}

// refuseOrder is the refusal of the order options by a lane without keys.
func (c config) refuseOrder(what string) error {
	if c.seqOrder {
		return fmt.Errorf("redislane: WithSequenceOrder orders a key's waiters: a %s lane has no keys: %w", what, ErrInvalidConfig)
	}
	return nil
}

// maxSequence bounds a Sequence number on a fleet key: the scripts count
// in doubles, exact up to 2^53.
const maxSequence = 1 << 53

// errSeqRange refuses a number the scripts cannot compare exactly.
var errSeqRange = fmt.Errorf("redislane: a Sequence on a fleet key must lie within ±2^53 (Redis scripts count in doubles): %w", ErrInvalidConfig)

// seqScripts are the scripts of a Keyed made with WithSequenceOrder: the
// bodies of the FIFO scripts run over the sequence library, which serves
// a key's queue in number order and holds back a number whose predecessor
// is missing (see seqLib). The FIFO scripts are not touched by it.
type seqScripts struct {
	kind                     string // the kind stored in the meta hash
	acquire, release, refres *redis.Script
}

func newSeqScripts(cfg config) *seqScripts {
	var hold int64 // µs; 0: no hold
	kind := "keyed:seq"
	if cfg.holdSet {
		hold = int64(cfg.hold / time.Microsecond)
		kind += ":" + strconv.FormatInt(hold, 10)
	}
	lib := prelude + "\nlocal HOLD = " + strconv.FormatInt(hold, 10) + "\n" + seqLib
	return &seqScripts{
		kind:    kind,
		acquire: redis.NewScript(lib + seqAcquireBody),
		release: redis.NewScript(lib + releaseBody),
		refres:  redis.NewScript(lib + refreshBody),
	}
}

// The sequence library, run after the prelude with HOLD (the reorder hold
// in µs, 0 for none) defined. In a sequenced bucket, a queued entry's t
// field is "<lease ms>:<number>" (just "<lease ms>" for a call without a
// number, which waits at 0), and a holder's is "o" if its grant went on a
// hold that ran out; the bucket's hash keeps "last", the highest number
// granted (while the bucket's keys live: an idle key forgets it). The
// queue zset keeps its arrival numbers, which are never below the server's
// clock in µs when the entry came, so the first queued is the key's
// oldest waiter and its score tells how long it has waited.
//
// look is redefined over the prelude's, and the prelude's pump serves the
// queue through the library's order hooks: the bodies of the release and
// refresh scripts, which follow, call these.
const seqLib = `
-- tnum reads a queued entry's t field: its lease (ms) and its number.
local function tnum(v)
  if not v then return 0, 0 end
  local a, b = string.match(v, '^(%d+):(%-?%d+)$')
  if a then return tonumber(a), tonumber(b) end
  return tonumber(v) or 0, 0
end

-- gapped tells whether n (0: none) comes after a number not yet granted,
-- on a bucket whose highest granted number is last (nil: none).
local function gapped(last, n)
  if HOLD == 0 or n == 0 or not last or n <= last then return false end
  local d = n - last
  if last < 0 and n > 0 then d = d - 1 end -- 0 is no number: -1 then 1 is no gap
  return d > 1
end

-- seq_head picks the entry to serve next among the first 256 queued (in
-- arrival order): the lowest number, then the earliest arrival. It sets
-- B.head (nil: nobody queued), B.hseq (its arrival number), B.hn (its
-- number), B.ht (its lease), B.oldest (the first arrival number, µs) and
-- B.gap (the head is held back for a missing number).
local function seq_head(B)
  B.head, B.hseq, B.hn, B.ht, B.gap = nil, nil, 0, 0, false
  local r = redis.call('ZRANGE', B.q, 0, 255, 'WITHSCORES')
  if not r[1] then return end
  B.oldest = tonumber(r[2])
  local fs = {}
  for i = 1, #r, 2 do fs[#fs + 1] = 't:' .. r[i] end
  local ts = redis.call('HMGET', B.d, unpack(fs))
  local bi, bn, bt = 1, nil, 0
  for i = 1, #fs do
    local t, n = tnum(ts[i])
    if not bn or n < bn then bi, bn, bt = i, n, t end
  end
  B.head, B.hseq, B.hn, B.ht = r[2 * bi - 1], r[2 * bi], bn, bt
  B.gap = gapped(B.last, bn)
end

local fifo_look = look
local function look(B)
  fifo_look(B)
  if HOLD > 0 then B.last = tonumber(redis.call('HGET', B.d, 'last')) end
  seq_head(B)
end

-- granted_num notes that number n (0: none) was granted.
local function granted_num(B, n)
  if HOLD > 0 and n ~= 0 and (not B.last or n > B.last) then
    B.last = n
    B.f['last'] = s(n)
  end
end

-- order's hooks (the prelude's pump): the head is the one seq_head
-- picked. One waiting for a missing number is held back until the key's
-- oldest waiter has waited HOLD; then it goes, its grant marked "o" and
-- told with a trailing " 1". (A Keyed's limit never shrinks: no head is
-- heavy.)
function order.entry(B, M, head)
  B.out = false
  if B.gap then
    if nowus - B.oldest < HOLD then return end
    B.out = true
  end
  return tonumber(redis.call('HGET', B.d, 'w:' .. head)) or 0, B.ht, tonumber(B.hseq), false
end
function order.served(B, head)
  if B.out then B.f['t:' .. head] = 'o' end
  granted_num(B, B.hn)
  return B.out
end
order.next = seq_head
`

// seqAcquireBody is the acquire script of a sequenced Keyed: as acquireSrc
// without batches, plus the caller's number. A caller that finds its key
// free (nobody queued, the weight fits, its number not held back) takes
// it; any other queues and the queue is served in sequence order at once
// (pump), so that a number lower than the queued ones goes first. It
// replies {1, fence, 1 if the grant went on a hold that ran out, else 0},
// and otherwise as acquireSrc.
//
// ARGV: id, weight, limit, kind, lease ms, quarantine ms, try (0/1),
// channel, publish command, term of the limit, number (0: none)
const seqAcquireBody = acquireHead + `
local n = tonumber(ARGV[11]) or 0

pump(B, M, chan, pub, id)
local function mine() if B.mineOut then return {1, B.mine, 1} end return {1, B.mine, 0} end
if B.mine then return done(mine()) end
if retried(B, id, ttl) then
  local ft = redis.call('HMGET', B.d, 'f:' .. id, 't:' .. id)
  local o = 0
  if ft[2] == 'o' then o = 1 end
  return done({1, tonumber(ft[1]), o})
end

local queued = B.head and redis.call('ZSCORE', B.q, id)
if free(B, M, w, queued) and not gapped(B.last, n) then
  local f = grant(B, M, id, w, ttl)
  granted_num(B, n)
  return done({1, f, 0})
end

local seq, got = line_up(B, id, ttl, try, queued, tonumber, function(seq, e)
  redis.call('ZADD', B.q, s(seq), id)
  local t = tostring(ttl)
  if n ~= 0 then t = t .. ':' .. s(n) end
  return enter(B, M, id, w, t, e, chan, pub)
end)
if got then return done(mine()) end
local cap -- wake when the hold runs out
if B.gap and not shut(M) and nowus - B.oldest < HOLD then
  cap = math.ceil((B.oldest + HOLD - nowus) / 1000)
end
return done(waiting(M, B, ttl, try, seq, cap))
`
