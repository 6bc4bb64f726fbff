package redislane

// The order library, run after the prelude with STEP (the aging step in
// µs, 0 for no priorities), FAIR (1 under WithFairShare, else 0) and
// MAXTAG defined. It keeps the order of service of package semaphore
// (internal/waitq's Place and Ahead, semaphore's fairQueue) in the Redis
// queue of an ordered global lane:
//
//   - the queue zset q scores an entry by its position, not its arrival:
//     the head, the lowest score, is the one served next, so serving
//     costs what it costs on a FIFO lane (the prelude's first_queued);
//   - a queued entry's t field is "<lease ms>:<arrival µs>:<band>:<rank>",
//     the arrival being the arrival number (never below the server's
//     clock in µs when it came, so it is also when it came), the band its
//     priority (0 without STEP), the rank its fair-share start tag (0
//     without FAIR). Removing the t field, as the release script and the
//     prelude's look do, removes all of it;
//   - a newcomer is placed once, as it joins (join): ahead of the newest
//     waiters it goes ahead of, behind the first it does not, searching
//     from the newest, as waitq.PushOrdered does; its position is a
//     number between its neighbours' (renumber makes room when there is
//     none);
//   - under FAIR, the bucket's hash keeps the virtual time (fv) and the
//     key g (the fifth bucket key) the groups' records, one for each band
//     a group waits in: "<band>:<group>" -> finish of its last request in
//     that band, so that a group is charged in its calls' band only. A
//     waiter's tag is max(fv, its group's finish in its band),
//     the finish moves on by the request's length (sent by the instance:
//     its weight times 720720 over the group's weight), fv moves to the
//     tag of each waiter served if later, and records whose finish is at
//     most fv are dropped (they say nothing). When a waiter joins an empty
//     queue, fv restarts from 0 and the records go.
//
// bucket, look and flush are redefined over the prelude's, and the
// prelude's pump serves the queue through the library's order hooks: the
// bodies of the release, refresh and fleet scripts, which follow, call
// these.
const ordLib = `
-- GAP is the room between positions; WALK bounds the waiters a newcomer
-- is compared with.
local GAP, WALK = 1048576, 1024

-- fmtpos writes a position: a double with its fraction.
local function fmtpos(x) return string.format('%.17g', x) end

-- tplace reads a queued entry's t field: its lease (ms), arrival (µs),
-- band and rank.
local function tplace(v)
  if not v then return 0, 0, 0, 0 end
  local a, b, c, d = string.match(v, '^(%d+):(%d+):(%-?%d+):(%d+)$')
  if a then return tonumber(a), tonumber(b), tonumber(c), tonumber(d) end
  return tonumber(v) or 0, 0, 0, 0
end

-- ahead tells whether a newcomer (band pb, arrival pa, rank pr) goes
-- ahead of a queued waiter (wb, wa, wr): waitq.Ahead. Across bands, when
-- the band difference times the step is more than the time the waiter
-- has waited (its band aged by one per whole step waited is still below
-- the newcomer's); within a band, when the rank is lower.
local function ahead(pb, pa, pr, wb, wa, wr)
  if pb == wb then return pr < wr end
  local d = pb - wb
  if d <= 0 then return false end
  if STEP == 0 then return true end
  return d * STEP > math.max(pa - wa, 0)
end

local fifo_bucket = bucket
local function bucket(i, ml)
  local B = fifo_bucket(i, ml)
  B.g = KEYS[i + 4]
  return B
end

local fifo_look = look
local function look(B)
  fifo_look(B)
  if FAIR == 1 then B.v = tonumber(redis.call('HGET', B.d, 'fv')) or 0 end
end

local fifo_flush = flush
local function flush(B)
  fifo_flush(B)
  if B.gDirty then redis.call('PEXPIREAT', B.g, s(B.kx or (now + 3 * B.ml))) end
end

-- fair_key returns the tag at which a request of length len of group
-- joins band, and charges the group for it in that band (semaphore's
-- fairKey; the bands share fv, see the package doc).
local function fair_key(B, band, group, len)
  if not B.head then -- nobody waits: nothing refers to fv or the records
    B.v = 0
    B.f['fv'] = false
    redis.call('DEL', B.g)
  end
  local rec = s(band) .. ':' .. group
  local fin = tonumber(redis.call('ZSCORE', B.g, rec)) or 0
  local key = math.min(math.max(B.v, fin), MAXTAG)
  redis.call('ZADD', B.g, s(math.min(key + len, MAXTAG)), rec)
  redis.call('ZREMRANGEBYSCORE', B.g, '-inf', s(B.v))
  B.gDirty = true
  return key
end

-- renumber spaces the queue's positions GAP apart again, in their order.
local function renumber(B)
  local r = redis.call('ZRANGE', B.q, 0, -1)
  for i = 1, #r, 500 do
    local z = {}
    for j = i, math.min(i + 499, #r) do
      z[#z + 1] = s(j * GAP)
      z[#z + 1] = r[j]
    end
    redis.call('ZADD', B.q, unpack(z))
  end
end

-- slot is the position between the entries prev (older; nil: none) and
-- nxt (newer; nil: none), the newest queued being tail (nil: none), or
-- nil when there is no room.
local function slot(B, prev, nxt, tail)
  if not tail then return GAP end
  if not nxt then
    local p = tonumber(redis.call('ZSCORE', B.q, tail)) + GAP
    if p > 4503599627370496 then return nil end
    return p
  end
  local n = tonumber(redis.call('ZSCORE', B.q, nxt))
  if not prev then
    if n - GAP < -4503599627370496 then return nil end
    return n - GAP
  end
  local p = tonumber(redis.call('ZSCORE', B.q, prev))
  local m = (p + n) / 2
  if m <= p or m >= n then return nil end
  return m
end

-- join queues id, of band pb, arrival pa and rank pr, at its place: ahead
-- of the newest waiters it goes ahead of, behind the first one it does
-- not (waitq.PushOrdered), comparing it with WALK waiters at most.
local function join(B, id, pb, pa, pr)
  local prev, nxt, tail
  local walked, stop = 0, false
  while not stop and walked < WALK do
    local r = redis.call('ZREVRANGE', B.q, walked, walked + 31)
    if not r[1] then break end
    tail = tail or r[1]
    local fs = {}
    for i = 1, #r do fs[i] = 't:' .. r[i] end
    local ts = redis.call('HMGET', B.d, unpack(fs))
    for j = 1, #r do
      local _, wa, wb, wr = tplace(ts[j])
      if ahead(pb, pa, pr, wb, wa, wr) then
        nxt = r[j]
      else
        prev, stop = r[j], true
        break
      end
    end
    walked = walked + #r
    if #r < 32 then break end
  end
  if not stop and walked >= WALK then -- the bound: behind the next older one
    prev = redis.call('ZREVRANGE', B.q, walked, walked)[1]
  end
  local pos = slot(B, prev, nxt, tail)
  if not pos then
    renumber(B)
    pos = slot(B, prev, nxt, tail)
  end
  redis.call('ZADD', B.q, fmtpos(pos), id)
end

-- order's hooks (the prelude's pump): the head's lease, arrival and
-- rank are in its t field; serving it moves the virtual time on to its
-- rank (its tag), if later.
function order.entry(B, M, head)
  local wt = redis.call('HMGET', B.d, 'w:' .. head, 't:' .. head)
  local w = tonumber(wt[1]) or 0
  local ttl, arr, _, rank = tplace(wt[2])
  B.hrank = rank
  return w, ttl, arr, w > M.limit
end
function order.served(B)
  if FAIR == 1 and B.hrank > B.v then
    B.v = B.hrank
    B.f['fv'] = s(B.hrank)
  end
end
`

// ordAcquireBody is the acquire script of an ordered global lane: as
// acquireSrc without batches, plus the caller's band, group and request
// length. A caller that finds the lane free (nobody queued, the weight
// fits) takes it; any other is placed in the queue by the lane's order
// and the queue is served at once (pump), so that a newcomer placed at
// the head takes free units as from an empty queue. Replies as
// acquireSrc, the arrival number being the one in the entry's t field.
//
// KEYS: meta, h, q, x, d, and g under FAIR
// ARGV: id, weight, limit, kind, lease ms, quarantine ms, try (0/1),
// channel, publish command, term of the limit, band, group, length
const ordAcquireBody = acquireHead + `
local band, group, len = tonumber(ARGV[11]) or 0, ARGV[12] or '', tonumber(ARGV[13]) or 0

pump(B, M, chan, pub, id)
if B.mine then return done({1, B.mine}) end
if retried(B, id, ttl) then return done({1, tonumber(redis.call('HGET', B.d, 'f:' .. id))}) end

local queued = B.head and redis.call('ZSCORE', B.q, id)
if too_heavy(B, M, id, w, queued) then return done({-2, M.limit}) end
if free(B, M, w, queued) then return done({1, grant(B, M, id, w, ttl)}) end

local seq, got = line_up(B, id, ttl, try, queued, function()
  local _, a = tplace(redis.call('HGET', B.d, 't:' .. id))
  return a
end, function(seq, e)
  local rank = 0
  if STEP == 0 then band = 0 end
  if FAIR == 1 then rank = fair_key(B, band, group, len) end
  join(B, id, band, seq, rank)
  return enter(B, M, id, w, s(ttl) .. ':' .. s(seq) .. ':' .. s(band) .. ':' .. s(rank), e, chan, pub)
end)
if got then return done({1, B.mine}) end
return done(waiting(M, B, ttl, try, seq))
`
