package redislane

import "github.com/redis/go-redis/v9"

// The state of a lane in Redis. Every key carries the hash tag
// {lanes:<name>} (made WithHashTag: starts with {lanes:<tag>}{<name>},
// written {lanes:<name>} below), so one lane lives in one Cluster slot and
// each script touches one slot.
//
//	{lanes:<name>}:meta   hash: limit, lterm (a fleet lane's: the term in
//	                      which its limit was written), kind, fence (the
//	                      last fencing token),
//	                      qu (quarantine until, ms), cu (closed until, ms:
//	                      a cooldown, see coolScript), ml (longest lease seen,
//	                      ms), epoch (creation time, ms), rid (the run_id and
//	                      replication id of the server that last found the
//	                      state lost), term (a fleet lane's). No TTL: it is what
//	                      tells a lane in use from a lane whose state is gone.
//	{lanes:<name>}:leader a fleet lane's leader: "<id> <term>", with a TTL.
//	{lanes:<name>}:wake   pub/sub channel: "<id> <fence> <arrival number>"
//	                      for every permit handed to a queued waiter.
//
// and per bucket (the one bucket of a Weighted, one per key of a Keyed),
// with <b> = "g" or "k:<key>":
//
//	{lanes:<name>}:<b>:h  zset holder id -> expiry (ms, server time)
//	{lanes:<name>}:<b>:q  zset queued id -> arrival number (FIFO order; never
//	                      below the server clock in microseconds)
//	{lanes:<name>}:<b>:x  zset queued id -> expiry (ms, server time)
//	{lanes:<name>}:<b>:d  hash w:<id> weight, f:<id> fencing token,
//	                      t:<id> lease of a queued id (ms), held (total
//	                      weight of the holders), seq (arrival counter)
//
// Bucket keys expire two longest leases after an entry was last added or
// extended (d always with the others, so it never goes first), so an idle
// key of a Keyed lane leaves nothing behind.
//
// Time comes only from the server's TIME. A holder's entry is valid while
// its expiry is later than now; an expired entry is never extended, only
// removed.

// prelude is shared by the scripts. Each redis.call costs a few
// microseconds of the server's one thread, so the scripts read each thing
// once, batch the removals, and gather the writes to a bucket's hash into
// one HSET and one HDEL at the end (flush).
const prelude = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- integers are written with %.0f: exact below 2^53, never in e-notation
local function s(x) return string.format('%.0f', x) end

-- server_id names the server's state history: the run_id of the server
-- process that runs the script (a random id drawn at each start of
-- redis-server, its own on each node and replica, which no snapshot or
-- append-only file restores) and its replication id (master_replid,
-- drawn anew when a replica is promoted: a master that resynced from
-- another, losing writes, and was promoted again keeps its run_id but not
-- its replication id). Without them a restart or a resync that brought
-- back older state cannot be told from no change, so a script that
-- cannot read them fails rather than grant.
local function server_id()
  local ok, info = pcall(redis.call, 'INFO', 'server')
  local run = ok and type(info) == 'string' and string.match(info, 'run_id:(%x+)')
  local rok, rinfo = pcall(redis.call, 'INFO', 'replication')
  local repl = rok and type(rinfo) == 'string' and string.match(rinfo, 'master_replid:(%x+)')
  if not run or not repl then
    error({err = 'ERR redislane: the scripts need INFO server and INFO replication (run_id, master_replid) to tell a restart or a failover of Redis; allow INFO to this user'})
  end
  return run .. ':' .. repl
end

-- lost is the one path for a lane whose state Redis lost, or restored
-- from an older point (a restart that loaded a snapshot or an append-only
-- file, a failover, a migration to another node: the state was written by
-- another server process, rid). It quarantines the lane, so that nothing
-- is granted until every lease granted before the loss has ended (the
-- holders that Redis forgot cannot be told), and marks the state as this
-- server's. A fleet lane keeps the stored limit unless the caller's (the
-- last one it read, written in term lv, which Redis may have lost) is
-- newer: written in a later term (lterm). The first caller may be a
-- follower that has not read the leader's last write yet, or a new
-- instance with its initial limit (lv 0), and must not bring an older
-- limit back. It also gets a new term, above the stored one, above the
-- caller's highest (seen) and the server clock in microseconds: terms
-- never go back, and the leadership of an earlier term, which the leader
-- key may have brought back, is over (fleetSrc).
-- isfleet tells a fleet lane's kind: "fleet", or "fleet:<order>" for
-- one made with priorities or fair share (order.go).
local function isfleet(kind) return kind == 'fleet' or string.sub(kind, 1, 6) == 'fleet:' end

local function lost(M, limit, lv, kind, quar, seen)
  M.qu = math.max(M.qu, now + quar)
  local set = {'qu', s(M.qu), 'rid', M.rid}
  if not isfleet(kind) or not M.limit or lv > M.lv then
    M.limit, M.lv = limit, lv
    set[#set + 1] = 'limit'
    set[#set + 1] = s(limit)
    if isfleet(kind) then
      set[#set + 1] = 'lterm'
      set[#set + 1] = s(lv)
    end
  end
  if isfleet(kind) then
    M.term = math.max(M.term + 1, nowus, seen + 1)
    set[#set + 1] = 'term'
    set[#set + 1] = s(M.term)
  end
  redis.call('HSET', M.mk, unpack(set))
end

-- meta reads the lane's meta hash; M.ok is false when the caller's limit
-- or kind is not the lane's. The state is lost (see lost) when the hash is
-- missing (on first use too, which Redis cannot tell from a loss), when it
-- was written by another server process, or when its term is below one
-- that the caller saw (seen: a fleet instance's highest term, else 0).
-- lv is the term in which the caller's limit was written (a fleet
-- instance's last read, else 0).
local function meta(mk, limit, kind, lease, quar, seen, lv)
  seen, lv = seen or 0, lv or 0
  local m = redis.call('HMGET', mk, 'limit', 'kind', 'qu', 'ml', 'fence', 'rid', 'term', 'lterm', 'cu')
  local M = {mk = mk, rid = server_id(), ok = true, cu = tonumber(m[9]) or 0}
  if not m[1] then
    M.qu, M.ml, M.fence, M.term = 0, lease, 0, 0
    redis.call('HSET', mk, 'kind', kind, 'ml', lease, 'fence', 0, 'epoch', s(now))
    lost(M, limit, lv, kind, quar, seen)
    return M
  end
  M.limit, M.qu, M.ml = tonumber(m[1]), tonumber(m[3]) or 0, tonumber(m[4]) or 0
  M.fence, M.term, M.lv = tonumber(m[5]) or 0, tonumber(m[7]) or 0, tonumber(m[8]) or 0
  -- a fleet lane's limit is the stored one, changed by its leader (fleet.go)
  M.ok = m[2] == kind and (isfleet(kind) or M.limit == limit)
  if not M.ok then return M end
  if lease > M.ml then redis.call('HSET', mk, 'ml', lease); M.ml = lease end
  if m[6] ~= M.rid then
    lost(M, limit, lv, kind, quar, seen)
  elseif M.term < seen then
    -- The state is this server process's, so a loss was already found
    -- and quarantined: a call that does not pass seen (acquire, refresh,
    -- release) gave it a term below one an instance saw. Only the term
    -- moves past it; another quarantine would wait for nothing.
    M.term = math.max(M.term + 1, nowus, seen + 1)
    redis.call('HSET', mk, 'term', s(M.term))
  end
  return M
end

-- shut tells a lane that grants nothing now: quarantined, or closed by a
-- cooldown (cu); reopen is when it grants again.
local function shut(M) return now < M.qu or now < M.cu end
local function reopen(M) return math.max(M.qu, M.cu) end

-- next_fence returns the next fencing token: one more than the last, and
-- never below the server's clock in microseconds, so that tokens keep
-- increasing when the counter is lost with the rest of the state.
local function next_fence(M)
  local f = M.fence + 1
  if f < nowus then f = nowus end
  M.fence = f
  M.dirty = true
  return f
end

local function save(M)
  if M.dirty then redis.call('HSET', M.mk, 'fence', s(M.fence)) end
end

local function bucket(i, ml)
  return {h = KEYS[i], q = KEYS[i + 1], x = KEYS[i + 2], d = KEYS[i + 3], ml = ml, f = {}}
end

-- need makes the bucket's keys outlive an entry that expires at e. All its
-- keys expire at the mark kx (kept in d), which moves three longest leases
-- ahead when it comes within one longest lease of an entry's expiry.
local function need(B, e)
  if not B.kx or B.kx < e + B.ml then
    B.kx = e + 3 * B.ml
    B.kxDirty = true
  end
end

-- first_queued reads the first queued id (head) and its arrival number.
local function first_queued(B)
  local r = redis.call('ZRANGE', B.q, 0, 0, 'WITHSCORES')
  B.head, B.hseq = r[1], r[2]
end

-- forget drops holder id, whose lease ran out, when look has not (it
-- removes a bounded number).
local function forget(B, id)
  B.held = B.held - (tonumber(redis.call('HGET', B.d, 'w:' .. id)) or 0)
  B.heldDirty = true
  redis.call('ZREM', B.h, id)
  B.f['w:' .. id], B.f['f:' .. id], B.f['t:' .. id] = false, false, false
end

-- look reads the bucket once: held weight, expiry mark, arrival counter,
-- earliest holder expiry (first), first queued id (head). It removes
-- expired holders and expired queued ids, a bounded number of each.
local function look(B)
  local d = redis.call('HMGET', B.d, 'held', 'kx', 'seq')
  B.held, B.kx, B.seq = tonumber(d[1]) or 0, tonumber(d[2]), tonumber(d[3]) or 0
  local e = redis.call('ZRANGE', B.h, 0, 0, 'WITHSCORES')
  if e[1] and tonumber(e[2]) <= now then
    local gone = redis.call('ZRANGEBYSCORE', B.h, '-inf', now, 'LIMIT', 0, 64)
    local fields = {}
    for i, id in ipairs(gone) do fields[i] = 'w:' .. id end
    local ws = redis.call('HMGET', B.d, unpack(fields))
    for i, id in ipairs(gone) do
      B.held = B.held - (tonumber(ws[i]) or 0)
      B.f['w:' .. id], B.f['f:' .. id], B.f['t:' .. id] = false, false, false
    end
    redis.call('ZREM', B.h, unpack(gone))
    B.heldDirty = true
    e = redis.call('ZRANGE', B.h, 0, 0, 'WITHSCORES')
  end
  if e[1] then
    B.first = tonumber(e[2])
  elseif B.held ~= 0 then -- no holder left: the counter is stale
    B.held, B.heldDirty = 0, true
  end
  first_queued(B)
  if B.head then
    local stale = redis.call('ZRANGEBYSCORE', B.x, '-inf', now, 'LIMIT', 0, 64)
    if #stale > 0 then
      redis.call('ZREM', B.q, unpack(stale))
      redis.call('ZREM', B.x, unpack(stale))
      for _, id in ipairs(stale) do B.f['w:' .. id], B.f['t:' .. id] = false, false end
      first_queued(B)
    end
  end
end

-- flush writes what the script changed in the bucket's hash, and the
-- expiry of keys that got it late or were created.
local function flush(B)
  local set, del = {}, {}
  for k, v in pairs(B.f) do
    if v then set[#set + 1] = k; set[#set + 1] = v else del[#del + 1] = k end
  end
  if B.heldDirty then set[#set + 1] = 'held'; set[#set + 1] = B.held end
  if B.seqDirty then set[#set + 1] = 'seq'; set[#set + 1] = s(B.seq) end
  if #set > 0 and not B.kx then need(B, now) end
  if B.kxDirty then set[#set + 1] = 'kx'; set[#set + 1] = s(B.kx) end
  if #del > 0 then redis.call('HDEL', B.d, unpack(del)) end
  if #set > 0 then redis.call('HSET', B.d, unpack(set)) end
  local kx = s(B.kx or 0)
  if B.kxDirty then
    for _, k in ipairs({B.h, B.q, B.x, B.d}) do redis.call('PEXPIREAT', k, kx) end
  else
    if B.newH then redis.call('PEXPIREAT', B.h, kx) end
    if B.newQ then redis.call('PEXPIREAT', B.q, kx); redis.call('PEXPIREAT', B.x, kx) end
  end
end

-- grant grants w to id for ttl. With zadd, a table, it adds the holder's
-- score and id to it rather than to the holders: the caller adds them all
-- with one ZADD before flush.
local function grant(B, M, id, w, ttl, zadd)
  local f = next_fence(M)
  local e = now + ttl
  if zadd then
    zadd[#zadd + 1] = s(e)
    zadd[#zadd + 1] = id
  else
    redis.call('ZADD', B.h, s(e), id)
  end
  if not B.first then B.first, B.newH = e, true end
  B.f['w:' .. id], B.f['f:' .. id] = w, s(f)
  B.held, B.heldDirty = B.held + w, true
  need(B, e)
  return f
end

-- extend moves id's expiry in the zset k (the holders h or the queue's
-- expiries x) to one lease (ttl) from now; id must be in k.
local function extend(B, k, id, ttl)
  local e = now + ttl
  redis.call('ZADD', k, 'XX', s(e), id)
  need(B, e)
end

-- fresh gives id a fresh lease if it holds a grant whose lease has not run
-- out (a retried call: the same grant) and returns true; else false and
-- the expiry of id's expired entry, if it has one.
local function fresh(B, id, ttl)
  local exp = redis.call('ZSCORE', B.h, id)
  if not exp or tonumber(exp) <= now then return false, exp end
  extend(B, B.h, id, ttl)
  return true, exp
end

-- dequeue takes id out of the queue, and its lease with it; drop also
-- removes its weight (it leaves with nothing).
local function dequeue(B, id)
  redis.call('ZREM', B.q, id)
  redis.call('ZREM', B.x, id)
  B.f['t:' .. id] = false
end
local function drop(B, id)
  dequeue(B, id)
  B.f['w:' .. id] = false
end

-- too_heavy tells an acquire of weight w above the limit (a fleet lane
-- that shrank below it), which replies too heavy; id's queue entry, if
-- it has one (queued), is dropped.
local function too_heavy(B, M, id, w, queued)
  if w <= M.limit then return false end
  if queued then drop(B, id) end
  return true
end

-- arrival returns the arrival number of a new queue entry. Arrival
-- numbers keep increasing when the counter is lost (with the lane's
-- state, or with an idle bucket's keys), as fencing tokens do, so that
-- one never names two entries.
local function arrival(B)
  B.seq, B.seqDirty = math.max(B.seq + 1, nowus), true
  return B.seq
end

-- order is the lane's order of service, the hooks of pump: FIFO below;
-- the order and sequence libraries (orderlua.go, seq.go) replace them.
--   entry(B, M, head) reads the head's weight, lease (ms) and arrival
--     number, and tells whether it is heavier than the limit; it returns
--     nothing when the head is held back (pump stops);
--   served(B, head) notes the grant of the head; it returns true for a
--     grant marked "out" (one that went on a hold that ran out);
--   next(B) reads the new head after the head left the queue.
local order = {next = first_queued}
function order.entry(B, M, head)
  local wt = redis.call('HMGET', B.d, 'w:' .. head, 't:' .. head)
  local w = tonumber(wt[1]) or 0
  return w, tonumber(wt[2]) or 0, tonumber(B.hseq), w > M.limit
end
function order.served() end

-- pump hands free units to the queued ids in the lane's order (order), as
-- long as the head fits, and tells each one on the wake channel: "<id>
-- <fence> <arrival number>", and " 1" after it for a grant marked out.
-- The arrival number names the queue entry the grant was made for, so
-- that a waiter never takes a message that was meant for an entry of its
-- that has since expired as the grant of a later one. pub is SPUBLISH
-- (sharded pub/sub: a Cluster delivers on the lane's node only) or
-- PUBLISH. The grant of self (the caller's own id, if given) is not
-- published: it is left in B.mine (its fence) and B.mineOut.
local function pump(B, M, chan, pub, self)
  if shut(M) then return end
  for _ = 1, 64 do
    local head = B.head
    if not head then return end
    local w, ttl, arr, heavy = order.entry(B, M, head)
    if not w then return end
    -- heavier than a fleet lane's limit after a shrink: dropped, not waited
    -- for (its waiter's next call fails with too heavy)
    if w >= 1 and not heavy and B.held + w > M.limit then return end
    if w >= 1 and ttl >= 1 and not heavy then
      dequeue(B, head)
      local f = grant(B, M, head, w, ttl)
      local out = order.served(B, head)
      if head == self then
        B.mine, B.mineOut = f, out
      else
        local m = head .. ' ' .. s(f) .. ' ' .. s(arr)
        if out then m = m .. ' 1' end
        redis.call(pub, chan, m)
      end
    else -- a broken entry: drop it
      drop(B, head)
    end
    order.next(B)
  end
end

-- retried tells a retried acquire of id: true when id holds a grant
-- whose lease has not run out (it gets a fresh one: the same grant); an
-- expired one, beyond what look removed, is dropped.
local function retried(B, id, ttl)
  if not B.first then return false end
  local ok, exp = fresh(B, id, ttl)
  if not ok and exp then forget(B, id) end
  return ok
end

-- enter completes the new queue entry of id, which its caller placed in
-- the queue (q): its weight w, its t field and its expiry e. Then the
-- queue is served at once, so that an entry placed at the head takes free
-- units as from an empty queue; it returns true when id was granted (its
-- fence in B.mine).
local function enter(B, M, id, w, t, e, chan, pub)
  if not B.head then B.newQ = true end
  redis.call('HSET', B.d, 'w:' .. id, w, 't:' .. id, t)
  redis.call('ZADD', B.x, s(e), id)
  order.next(B)
  pump(B, M, chan, pub, id)
  need(B, e)
  return B.mine ~= nil
end

-- free tells an acquire of weight w that takes the lane at once: not
-- queued already (queued), the lane open, nobody queued, and w fits.
local function free(B, M, w, queued)
  return not queued and not shut(M) and not B.head and B.held + w <= M.limit
end

-- line_up queues an acquire of id that was not granted, except in try
-- mode, and returns its arrival number (0 in try mode) and whether it was
-- granted at once. An id queued already (queued: its score in q) keeps
-- its place with a fresh expiry, its arrival number read by arr(queued);
-- a new one gets the next arrival number seq, and place(seq, e) puts it
-- in the queue (e: its expiry) and returns true if it was granted at once
-- (see enter).
local function line_up(B, id, ttl, try, queued, arr, place)
  if try then return 0, false end
  local e = now + ttl
  if queued then
    extend(B, B.x, id, ttl)
    return arr(queued), false
  end
  local seq = arrival(B)
  if place(seq, e) then return seq, true end
  need(B, e)
  return seq, false
end

-- waiting replies to an acquire that was not granted: {0, hint,
-- quarantined 0/1, closed for ms} in try mode, else {2, hint, quarantined
-- 0/1, arrival number seq, closed for ms}. The hint is how long until
-- something can change: until the lane reopens, else until the earliest
-- holder's lease ends, else a lease (ttl); no later than cap (ms), if
-- given.
local function waiting(M, B, ttl, try, seq, cap)
  local hint, qflag = ttl, 0
  if now < M.qu then qflag = 1 end
  if shut(M) then
    hint = reopen(M) - now
  elseif B.first then
    hint = B.first - now
  end
  if cap then hint = math.min(hint, cap) end
  local cool = math.max(M.cu - now, 0)
  if try then return {0, hint, qflag, cool} end
  return {2, hint, qflag, seq, cool}
end
`

// acquireHead begins the acquire scripts (acquireSrc, ordAcquireBody,
// seqAcquireBody), after the prelude and the lane's library: it reads the
// arguments they share (see acquireScript), the lane's meta hash and its
// bucket, and defines done, which writes what the script changed and
// replies r.
const acquireHead = `
local id, w, limit, kind = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local ttl, quar, try, chan = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7] == '1', ARGV[8]
local pub, lv = ARGV[9], tonumber(ARGV[10]) or 0

local M = meta(KEYS[1], limit, kind, ttl, quar, 0, lv)
if not M.ok then return {-1, M.limit} end
local B = bucket(2, M.ml)
look(B)

local function done(r)
  flush(B)
  save(M)
  return r
end
`

// Status codes of the acquire script.
const (
	stTry      = 0  // try mode: not granted, not queued {0, hint ms, quarantined 0/1, closed for ms}
	stGranted  = 1  // {1, fence}
	stQueued   = 2  // {2, hint ms, quarantined 0/1, arrival number, closed for ms}
	stMismatch = -1 // {-1, stored limit}
	stTooHeavy = -2 // {-2, stored limit}: heavier than a fleet lane's limit now
)

// acquireScript grants id if nobody is queued and the weight fits, returns
// the existing grant (with a fresh lease) if id already holds, so that a
// retried call never grants twice, and otherwise queues id (or, in try
// mode, does nothing) and returns a hint: how long until something can
// change.
//
// A call may carry, after id, the requests of the waiters behind it in its
// instance's line (a batch), in line order. When id is granted, they are
// taken in that order, each granted (or its existing grant returned, as for
// id) as long as nobody is queued, the lane is not quarantined and its
// weight fits; the first that is not ends the batch, so that a batch never
// grants a waiter before one ahead of it: the granted ones are a prefix.
// They are never queued: the waiters that are not granted wait in their
// line, and ask again when a call of their head carries them or when they
// become the head.
//
// KEYS: meta, h, q, x, d
// ARGV: id, weight, limit, kind, lease ms, quarantine ms, try (0/1), channel,
// publish command (SPUBLISH or PUBLISH), term of the limit (lterm), then
// triples (id, weight, may hold 0/1) of the requests behind id: "may hold"
// is 1 for an id that an earlier call may have granted (only such ids are
// looked up among the holders; the others are new). With such triples, a
// grant of id replies {1, fence, 0, 0, then the fence of each request
// granted}.
var acquireScript = redis.NewScript(acquireSrc)

const acquireSrc = prelude + acquireHead + `
pump(B, M, chan, pub)

-- held returns the fencing token of hid's grant, with a fresh lease, if
-- hid holds one that has not expired (a retried call: the same grant),
-- and else nil and hid's expired entry, if it has one.
local function held(hid)
  if not B.first then return nil, nil end
  local ok, exp = fresh(B, hid, ttl)
  if not ok then return nil, exp end
  return tonumber(B.f['f:' .. hid] or redis.call('HGET', B.d, 'f:' .. hid)), exp
end

-- granted replies to a grant of id (fence f), after granting the prefix
-- of the requests behind it that fits (see acquireScript).
local function granted(f)
  local out = {1, f}
  if #ARGV > 10 then
    out = {1, f, 0, 0}
    local zadd = {}
    if not try and not shut(M) then
      for i = 11, #ARGV - 2, 3 do
        local fid, fw = ARGV[i], tonumber(ARGV[i + 1])
        local ff, fexp
        if ARGV[i + 2] == '1' then ff, fexp = held(fid) end
        if not ff then
          -- an expired entry of fid is left to fid's own call, which removes it
          if B.head or fexp or not fw or fw < 1 or B.held + fw > M.limit then
            break
          end
          ff = grant(B, M, fid, fw, ttl, zadd)
        end
        out[#out + 1] = ff
      end
    end
    if #zadd > 0 then redis.call('ZADD', B.h, unpack(zadd)) end
  end
  return done(out)
end

if B.first then
  local f, exp = held(id)
  if f then
    return granted(f)
  elseif exp then -- expired, beyond what look removed
    forget(B, id)
  end
end

local queued = B.head and redis.call('ZSCORE', B.q, id)
if too_heavy(B, M, id, w, queued) then return done({-2, M.limit}) end
if free(B, M, w, queued) then return granted(grant(B, M, id, w, ttl)) end

local seq = line_up(B, id, ttl, try, queued, tonumber, function(seq, e)
  redis.call('ZADD', B.q, s(seq), id)
  redis.call('ZADD', B.x, s(e), id)
  if not B.head then B.newQ = true end
  B.f['w:' .. id], B.f['t:' .. id] = w, ttl
end)
return done(waiting(M, B, ttl, try, seq))
`

// The release script returns 0 when id was neither held nor queued, 1 when
// it held a valid lease, 2 when it held an expired lease, and 3 when it was
// queued; callers only need to know that the call went through.

// releaseScript removes id, held or queued, and the ids after it, and hands
// the freed units to the queue. It is idempotent.
//
// KEYS: meta, h, q, x, d
// ARGV: id, limit, kind, lease ms, quarantine ms, channel, publish command,
// term of the limit (lterm), then more ids to remove, if any (releases
// that an instance's callers made together)
var releaseScript = redis.NewScript(releaseSrc)

const releaseSrc = prelude + releaseBody

const releaseBody = `
local limit, kind = tonumber(ARGV[2]), ARGV[3]
local ttl, quar, chan, pub = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7]
local lv = tonumber(ARGV[8]) or 0
local h, q, x, d = KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local ids = {ARGV[1]}
for i = 9, #ARGV do ids[#ids + 1] = ARGV[i] end
local res = 0
local hs, ws = {}, {}
for k, id in ipairs(ids) do
  local r = 0
  local exp = redis.call('ZSCORE', h, id)
  if exp then
    r = 2
    if tonumber(exp) > now then r = 1 end
    hs[#hs + 1] = id
    ws[#ws + 1] = 'w:' .. id
  elseif redis.call('ZSCORE', q, id) then
    redis.call('ZREM', q, id)
    redis.call('ZREM', x, id)
    redis.call('HDEL', d, 'w:' .. id, 't:' .. id)
    r = 3
  end
  if k == 1 then res = r end
end
if #hs > 0 then
  local w = redis.call('HMGET', d, unpack(ws))
  local del, freed = {}, 0
  for i, id in ipairs(hs) do
    local n = tonumber(w[i])
    if n then
      freed = freed + n
      del[#del + 1] = 'w:' .. id
      del[#del + 1] = 'f:' .. id
      del[#del + 1] = 't:' .. id
    end
  end
  redis.call('ZREM', h, unpack(hs))
  if #del > 0 then
    redis.call('HDEL', d, unpack(del))
    redis.call('HINCRBY', d, 'held', -freed)
  end
end
if redis.call('ZRANGE', q, 0, 0)[1] then -- somebody waits: hand the units on
  local M = meta(KEYS[1], limit, kind, ttl, quar, 0, lv)
  local B = bucket(2, M.ml)
  look(B)
  pump(B, M, chan, pub)
  flush(B)
  save(M)
end
return res
`

// Results of the refresh script, one per id.
const (
	refMissing = 0 // neither held nor queued: a holder's lease is lost
	refHeld    = 1 // held; the lease now runs one lease from the call
	refQueued  = 2 // queued; the queue entry now runs one lease from the call
)

// refreshScript extends the ids of one instance, held or queued, by one
// lease from now. It extends only ids that are present and unexpired, and
// never re-creates a missing one.
//
// KEYS: meta, then h, q, x, d of each bucket
// ARGV: limit, kind, lease ms, quarantine ms, channel, publish command, term
// of the limit (lterm), then pairs of (bucket number from 0, id)
var refreshScript = redis.NewScript(refreshSrc)

const refreshSrc = prelude + refreshBody

const refreshBody = `
local limit, kind = tonumber(ARGV[1]), ARGV[2]
local ttl, quar, chan, pub = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6]
local lv = tonumber(ARGV[7]) or 0

local M = meta(KEYS[1], limit, kind, ttl, quar, 0, lv)
local out = {}
local bs = {}
for i = 8, #ARGV, 2 do
  local b = tonumber(ARGV[i])
  local id = ARGV[i + 1]
  local B = bs[b]
  if not B then
    B = bucket(2 + 4 * b, math.max(M.ml, ttl))
    look(B)
    bs[b] = B
  end
  local st = 0
  if M.ok then
    local ok, exp = fresh(B, id, ttl)
    if ok then
      st = 1
    elseif not exp and B.head and redis.call('ZSCORE', B.q, id) then
      extend(B, B.x, id, ttl)
      st = 2
    end
  end
  out[#out + 1] = st
end
for _, B in pairs(bs) do
  if M.ok then pump(B, M, chan, pub) end
  flush(B)
end
save(M)
return out
`

// coolScript closes the lane until d ms from now on the server's clock
// (cu in the meta hash), unless it is closed until later already: a
// cooldown only ever extends, so that no instance shortens another's.
// While it is closed, nothing is granted (shut): not by an acquire, a
// batch, a release's hand-over, a refresh or a raise; queued ids keep
// their place. It replies {1, ms until the lane reopens from the
// cooldown (0: open)}, or {-1, stored limit} for a lane of another
// capacity or kind. d <= 0 sets nothing and reads.
//
// KEYS: meta
// ARGV: limit, kind, lease ms, quarantine ms, term of the limit (lterm), d ms
var coolScript = redis.NewScript(coolSrc)

const coolSrc = prelude + `
local limit, kind = tonumber(ARGV[1]), ARGV[2]
local ttl, quar, lv, d = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]) or 0, tonumber(ARGV[6])
local M = meta(KEYS[1], limit, kind, ttl, quar, 0, lv)
if not M.ok then return {-1, M.limit} end
if d > 0 and now + d > M.cu then
  M.cu = now + d
  redis.call('HSET', KEYS[1], 'cu', s(M.cu))
end
return {1, math.max(M.cu - now, 0)}
`

// Results of the fleet script.
const (
	flFollower = 0  // {0, term, limit, 0, lterm, overloads, held}
	flLeader   = 1  // {1, term, limit, written 0/1, lterm, overloads, held}
	flMismatch = -1 // {-1, 0, stored limit, 0, 0, 0, 0}: the name is a lane of another kind
)

// fleetScript is the periodic call of every instance of a fleet lane: it
// reads the limit in force, keeps or takes the leadership (a key holding
// the leader's id and its term, with a TTL, taken only when absent,
// renewed only by its holder), writes the leader's new limit, and hands out
// what a raise frees. A write is fenced: it is applied only if the caller
// holds the leadership in the term (a number that increases with each new
// leader, and never goes back, whatever Redis lost or restored: see lost)
// in which its value was proposed. A leader key whose term is not the
// lane's is from a term that is over (Redis restored it with an older
// state, or the state was lost since): it is void. A resign deletes the
// leader key if the caller holds it.
//
// KEYS: meta, leader, then h, q, x, d of the lane's bucket
// ARGV: id, limit (the caller's last read: to create or restore the lane
// with), kind, lease ms, quarantine ms, channel, publish command, candidate
// (0/1), leader ttl ms, set (0/1), value, term of the value, resign (0/1),
// the highest term the caller saw, the term in which the caller's limit was
// written (lterm), the followers' overloads it shares, the oldest fence
// the caller held at one of them (0: none)
//
// The limit is stored with the term in which it was written (lterm), so
// that a restart never brings an older limit back (see lost).
var fleetScript = redis.NewScript(fleetSrc)

const fleetSrc = prelude + fleetBody

const fleetBody = `
local id, limit, kind = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local ttl, quar, chan, pub = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7]
local cand, lttl, set = ARGV[8] == '1', tonumber(ARGV[9]), ARGV[10] == '1'
local value, vterm, resign = tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13] == '1'
local seen, lv = tonumber(ARGV[14]) or 0, tonumber(ARGV[15]) or 0
local ovadd, ovfence = tonumber(ARGV[16]) or 0, tonumber(ARGV[17]) or 0

local M = meta(KEYS[1], limit, kind, ttl, quar, seen, lv)
if not M.ok then return {-1, 0, M.limit, 0, 0, 0, 0} end
-- the weight the fleet holds now, for the leader's controller (the
-- bucket's counter: a holder whose lease ran out counts until a grant's
-- look drops it)
local held = tonumber(redis.call('HGET', KEYS[6], 'held')) or 0
-- the overloads the followers' controllers shared, for the leader's:
-- dropped if the caller held a permit granted before the limit's last cut
-- (its fence at most lc, the last fence issued when the cut was written):
-- the refused work's permit was one of those it held, and may be a
-- leftover of the old limit, which the cut answered
local ov
if ovadd > 0 and (ovfence == 0 or ovfence > (tonumber(redis.call('HGET', KEYS[1], 'lc')) or 0)) then
  ov = redis.call('HINCRBY', KEYS[1], 'ov', ovadd)
else
  ov = tonumber(redis.call('HGET', KEYS[1], 'ov') or '0')
end
local lk = KEYS[2]
local term = M.term
-- the leader key holds "<id> <term>"
local cur = redis.call('GET', lk)
if cur then
  local cid, cterm = string.match(cur, '^(%S+) (%d+)$')
  if cterm == s(term) then
    cur = cid
  else -- the leadership of a term that is over
    redis.call('DEL', lk)
    cur = nil
  end
end
if resign then
  if cur == id then redis.call('DEL', lk) end
  return {0, term, M.limit, 0, M.lv, ov, held}
end
local lead = false
if cur == id then
  redis.call('PEXPIRE', lk, lttl)
  lead = true
elseif not cur and cand then
  -- a new term: above the last, above every term the caller saw, and
  -- above the server clock in microseconds
  term = math.max(term + 1, nowus, seen + 1)
  redis.call('HSET', KEYS[1], 'term', s(term))
  redis.call('SET', lk, id .. ' ' .. s(term), 'PX', lttl)
  lead = true
end
if not lead then return {0, term, M.limit, 0, M.lv, ov, held} end
local written = 0
if set and vterm == term and value ~= M.limit then
  local raised = value > M.limit
  redis.call('HSET', KEYS[1], 'limit', s(value), 'lterm', s(term))
  if not raised then redis.call('HSET', KEYS[1], 'lc', s(M.fence)) end
  M.limit, M.lv = value, term
  written = 1
  if raised then -- hand what the raise frees to the queue
    local B = bucket(3, M.ml)
    look(B)
    pump(B, M, chan, pub)
    flush(B)
  end
end
save(M)
return {1, term, M.limit, written, M.lv, ov, held}
`

// A Tokens lane keeps, beside its meta hash (kind "tokens:<window ms>",
// limit: the budget of a window):
//
//	{lanes:<name>}:t:z  zset charge -> server time of the charge (ms)
//	{lanes:<name>}:t:w  hash charge -> tokens, sum (their total)
//
// A charge is an admission, named by its id (its estimate, lowered to the
// actual count by a refund), or the debt of one, "<id>+" (what the actual
// count passed the estimate by, charged when it was settled). A charge
// counts while now - window < its time: it leaves the window when the
// server's clock reaches its time plus the window. Both keys expire two
// windows after the last write.

// tokensPrelude is shared by the Tokens scripts: it reads the meta hash
// and drops the charges that left the window (a bounded number; more that
// are left count on, which only delays a grant).
const tokensPrelude = prelude + `
local Z, W = KEYS[2], KEYS[3]
local function window_drop(win)
  local gone = redis.call('ZRANGEBYSCORE', Z, '-inf', now - win, 'LIMIT', 0, 256)
  local sum = tonumber(redis.call('HGET', W, 'sum')) or 0
  if #gone > 0 then
    local ws = redis.call('HMGET', W, unpack(gone))
    for i = 1, #gone do sum = sum - (tonumber(ws[i]) or 0) end
    redis.call('ZREM', Z, unpack(gone))
    redis.call('HDEL', W, unpack(gone))
    if redis.call('ZCARD', Z) == 0 then sum = 0 end -- nothing left: no drift can outlive a window
    redis.call('HSET', W, 'sum', s(sum))
  end
  return sum
end
local function keep(win)
  redis.call('PEXPIRE', Z, 2 * win)
  redis.call('PEXPIRE', W, 2 * win)
end
`

// Status codes of the tokens script (beside stMismatch and stTooHeavy).
const (
	tkWait    = 0 // {0, ms until the window has room (or the lane reopens), ms until it reopens from a cooldown[, 1 if quarantined]}
	tkGranted = 1 // {1, server time of the charge (ms)}
)

// tokensScript charges n tokens to id now, if the window has room for
// them and the lane is open, or returns how long until it may: the time
// until enough of the oldest charges leave the window, or until the lane
// reopens. A retried call of an id already charged (in the window)
// returns the same charge.
//
// KEYS: meta, z, w
// ARGV: id, n, limit, kind, lease ms, quarantine ms, window ms
var tokensScript = redis.NewScript(tokensSrc)

const tokensSrc = tokensPrelude + `
local id, n, limit, kind = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local ttl, quar, win = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local M = meta(KEYS[1], limit, kind, ttl, quar, 0, 0)
if not M.ok then return {-1, M.limit} end
if n > M.limit then return {-2, M.limit} end
local sum = window_drop(win)
local at = redis.call('ZSCORE', Z, id)
if at then return {1, tonumber(at)} end
local cool = math.max(M.cu - now, 0)
if shut(M) then return {0, reopen(M) - now, cool, (now < M.qu) and 1 or 0} end
if sum + n <= M.limit then
  redis.call('ZADD', Z, s(now), id)
  redis.call('HSET', W, id, s(n), 'sum', s(sum + n))
  keep(win)
  return {1, now}
end
-- the oldest charges leave first: the one whose leaving makes room
local need = sum + n - M.limit
local r = redis.call('ZRANGE', Z, 0, 255, 'WITHSCORES')
local ids = {}
for i = 1, #r, 2 do ids[#ids + 1] = r[i] end
local ws = redis.call('HMGET', W, unpack(ids))
for i = 1, #ids do
  need = need - (tonumber(ws[i]) or 0)
  if need <= 0 then return {0, math.max(tonumber(r[2 * i]) + win - now, 1), 0} end
end
return {0, math.max(tonumber(r[#r]) + win - now, 1), 0}
`

// settleScript sets what the charge id counts to the actual count of its
// call: its admission entry to min(estimate, actual), if it is still in
// the window (a refund never returns more than the charge holds, nor
// tokens that have left the window), and its debt entry "<id>+" to what
// actual passes the estimate by, charged now. It is absolute, so a
// retried or repeated call changes nothing more. It replies {1, sum}.
//
// KEYS: meta, z, w
// ARGV: id, estimate, actual, window ms
var settleScript = redis.NewScript(settleSrc)

const settleSrc = tokensPrelude + `
local id, est, actual, win = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local sum = window_drop(win)
if redis.call('ZSCORE', Z, id) then
  local cur = tonumber(redis.call('HGET', W, id)) or 0
  local want = math.min(est, actual)
  if want ~= cur then
    sum = sum + want - cur
    redis.call('HSET', W, id, s(want))
  end
end
local did = id .. '+'
local debt = math.max(actual - est, 0)
local cur = 0
if redis.call('ZSCORE', Z, did) then cur = tonumber(redis.call('HGET', W, did)) or 0 end
if debt > cur then
  redis.call('ZADD', Z, s(now), did)
  redis.call('HSET', W, did, s(debt))
  sum = sum + debt - cur
elseif debt < cur then
  if debt == 0 then
    redis.call('ZREM', Z, did)
    redis.call('HDEL', W, did)
  else
    redis.call('HSET', W, did, s(debt))
  end
  sum = sum - (cur - debt)
end
redis.call('HSET', W, 'sum', s(sum))
keep(win)
return {1, sum}
`
