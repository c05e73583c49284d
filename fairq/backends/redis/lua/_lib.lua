-- _lib.lua: shared helpers, the start of the one Redis Functions library fairq loads.
--
-- scripts.py builds the library: a header naming it (it defines LIBRARY, the library name,
-- LAYOUT, the record layout version from keys.py, QUEUE_KEYS, the keys of a queue's block,
-- REPLY_TTL, see `register_once`, and the learned-cost rule's COST_WINDOW, COST_TRUSTED and
-- COST_OUTLIER from fairq/policy/cost.py), this file, the helper parts of the other steps
-- (_lib_tenants.lua, _lib_jobs.lua, _lib_leases.lua, ...: scripts.NEEDS orders them), then
-- one file per operation. Each operation file
-- registers one function with `register` or `register_once` below and states its own
-- contract (KEYS, ARGV, keys touched, return value). The helpers are created once, when the
-- library is loaded, not per call.
--
-- Layout (docs in fairq/backends/redis/keys.py). Every per-queue key carries the hash tag
-- {queue}; a queue's keys arrive in KEYS as one block of QUEUE_KEYS consecutive names:
--   meta      hash   V (virtual clock), ntid (tenant id counter), seq (the last job's
--                    enqueue order number: `next_seq`), layout (LAYOUT, written
--                    with the first tenant), the queue defaults: weight, cap,
--                    rcount/rperiod/rburst (rate), half_life, max_debt, and the queue's own
--                    cap on leased jobs maxf (max_in_flight; for Python's reads) and the same
--                    packed in conf (for these functions: `conf_of`), and due (no
--                    maintenance is needed before it: `next_due_of`)
--   tenants   hash   tid -> binary record (TENANT below): F, ready, scheduled, running,
--                    succeeded, failed, dead, usage, usage_at, kept (succeeded and cancelled
--                    jobs still stored); optional S, weight, cap, eseq, tat, limited_until,
--                    rcount, rperiod, rburst, cancelled (a lifetime count; absent: 0).
--                    Pruning a tenant's last stored job may forget it
--                    (`forget`): its fields in tenants, tids and tnames go; a returning
--                    tenant gets a new tid
--   tids      hash   tenant name (exact bytes) -> tid
--   tnames    hash   tid -> tenant name
--   eligible  zset   score S, member head_seq(16) .. tid(10) .. LONG: order is exactly
--                    (S, head_seq)
--   ready     zset   all scores 0, member tid(10) .. prio(10) .. seq(16) .. job_id (lex order)
--   readyat   zset   all scores 0, member tid(10) .. sortable(ready_at)(8) .. seq(16)
--   scheduled zset   score run_at, member seq(16) .. job_id: order (run_at, seq)
--   running   zset   score deadline, member seq(16) .. LONG .. job_id: order (deadline, seq);
--                    one member per leased job, so ZCARD is the queue's count in flight
--   dead      zset   score finished_at, member seq(16) .. job_id
--   done      zset   score finished_at, member seq(16) .. job_id (succeeded without a kept
--                    result, and cancelled: the retention prunes them)
--   jobs      hash   job_id -> binary record (JOB in _lib_jobs.lua): state, seq, tid,
--                    priority, max_attempts, attempts, leases, enqueued_at, run_at,
--                    lease_timeout, cost (as declared), charged; optional ready_at,
--                    started_at, deadline, finished_at, cancel_at (a running job was asked
--                    to stop then), result_until (its kept result expires then); flags
--                    fixed (declared learn_cost=False) and unclaimed (a relayed job no
--                    worker claimed yet); while running, the job's name after the record
--   bodies    hash   job_id -> len(name) .. ":" .. name .. payload, after "h" .. len(headers)
--                    .. ":" .. headers when the job has headers (only the name is read here)
--   errors    hash   job_id -> last error text
--   backlog   set    tids with ready > 0 (what set_queue must refresh)
--   wake      list   wake-up tokens for idle workers (BLPOP), trimmed to WAKE_MAX; emptied
--                    while the queue is full (`wake_waiters`)
--   limited   zset   score limited_until, member the tenant's name (exact UTF-8 bytes): equal
--                    scores order by memcmp of UTF-8, which is code point order, so the zset
--                    order is exactly the model's (limited_until, tenant) tuple order
--   tats      zset   score tat, member tid(10): tenants whose GCRA tat may still hold them
--                    (set_queue resettles these; entries with tat <= now are trimmed there)
--   progress  hash   job_id -> an iterative job's last checkpoint (Backend.checkpoint: JSON text,
--                    kept as given), deleted with the job
--   results   hash   job_id -> the return value an ack kept (fairq/results.py: JSON text,
--                    kept as given), deleted with the job
--   expiring  zset   score result_until, member seq(16) .. job_id: the succeeded jobs that
--                    keep a result, pruned with it once it expires (not by the retention)
--   costs     hash   job name (exact bytes) -> struct.pack('>Hd', runs, mean): the learned
--                    run time of the queue's jobs of that name (fairq/policy/cost.py), written
--                    by the end of a claimed run (`learn` in _lib_costs.lua), read by dispatch
--   fig       hash   the figures of the call's time slot (not one key of a fixed name: the
--                    caller names the slot's key, keys.py figures_key): field tid .. ':' ..
--                    kind .. bucket -> count, kind w (wait), r (run time) or o (outcome);
--                    expires FIG_TTL seconds after its last write (fairq/figures.py)
--
-- Records are struct.pack layouts (see `formats`): a double packed and unpacked is the same
-- double, and the C side does the work that parsing text did. Floats in other places (zset
-- scores, meta) are string.format('%.17g', x), which reads back to the same double.
-- The tag arithmetic copies fairq/policy/fairness.py, rate.py and history.py expression for
-- expression (math.pow is C pow, as Python's math.pow), so every double is bit-identical.

local TIDW, SEQW, PRIOW = 10, 16, 10
local MIN_CHARGE = 0.001
local DEFAULT_HALF_LIFE = 60.0
local WAKE_MAX, WAKE_PER_CALL = 64, 8
-- Arguments to redis.call are passed as text where they are constants: Redis turns a Lua
-- number into text with a "%.17g" printf on every call, which costs about half a command.
local WAKE_LAST = '63'  -- WAKE_MAX - 1
local PRIO_TOP = 2147483647
-- LAYOUT, the record layout version kept in each queue's meta, is set in the library's
-- header from keys.py (scripts.py), so Python and Lua cannot disagree on it.
-- Members of eligible and running carry LONG, which makes them longer than Redis's
-- zset-max-listpack-value (64 by default), so those zsets are skip lists from their first
-- member: inserting into a listpack zset parses every stored score with strtod, which cost
-- more than any other part of a ZADD there. Eligible has a member per backlogged tenant
-- and running one per running job, so the extra bytes are few.
local LONG = '--------------------------------------------------'  -- 50 bytes

-- The KEYS and ARGV of the running call: a function receives them as arguments, and the
-- helpers read them as a script would (Redis runs one call at a time). server_now is the
-- server's clock as the call first read it (`now_of`), nil until then. learned holds the
-- learned costs the call read or changed, by costs key and job name (`learned_of` in
-- _lib_costs.lua): each is read once per call, and a dispatch charges what an ack earlier
-- in the same call just learned.
local KEYS, ARGV, server_now, learned = {}, {}, nil, {}

-- Register operation `name` as the function LIBRARY .. '_' .. name.
local function register(name, body)
  redis.register_function(LIBRARY .. '_' .. name, function(keys, args)
    KEYS, ARGV, server_now, learned = keys, args, nil, {}
    return body()
  end)
end

-- Register operation `name` so that a call sent twice runs once. redis-py sends a command
-- again when its connection fails before the reply comes, and the first sending may have
-- run: without this, a dequeue sent again leases a second batch, an ack finds its lease gone.
-- The caller appends to KEYS its reply key (one per caller and queue, in that queue's slot:
-- Layout.reply_key) and to ARGV a new call id per logical call (the same on a re-sending).
-- The key keeps the id and the reply, JSON-encoded (cjson keeps bytes as they are; numbers
-- in replies are counts and block numbers, well within its 14 digits), for
-- REPLY_TTL ms (the library's header, from db.py: longer than redis-py's retries
-- last); a call that finds its own id there returns that reply and changes nothing.
-- The body sees KEYS and ARGV without the two. A stored reply goes through `replay` when
-- given (called with KEYS and ARGV set, like the body): what it returns is the answer, for
-- a reply whose meaning changed with the time that passed since the first sending ran
-- (dequeue.lua: leases run from their start).
local function register_once(name, body, replay)
  redis.register_function(LIBRARY .. '_' .. name, function(keys, args)
    local key, head = keys[#keys], args[#args] .. ' '
    keys[#keys], args[#args] = nil, nil
    KEYS, ARGV, server_now, learned = keys, args, nil, {}
    if redis.call('GETRANGE', key, 0, #head - 1) == head then
      local stored = cjson.decode(string.sub(redis.call('GET', key), #head + 1))
      if replay ~= nil then return replay(stored) end
      return stored
    end
    local reply = body()
    redis.call('SET', key, head .. cjson.encode(reply), 'PX', REPLY_TTL)
    return reply
  end)
end

-- Take the first n keys off KEYS: the keys shared by queues (the directory, the queues set)
-- that a call on a single Redis passes before its key blocks; a call on a Redis Cluster passes
-- none (n = 0: a script there touches one slot; the caller writes those keys itself).
local function take_globals(n)
  local found = {}
  for i = 1, tonumber(n) do found[i] = table.remove(KEYS, 1) end
  return found
end

-- string.format costs as much as a redis.call, so fmt remembers its last answer (one call
-- formats `now` many times); 0 is always formatted, as 0 == -0 but '0' ~= '-0'.
local last_x, last_text = nil, nil
local function fmt(x)
  if x ~= last_x or x == 0 then last_x, last_text = x, string.format('%.17g', x) end
  return last_text
end
-- Whole numbers as text, remembered across calls: tids and lease numbers recur in every
-- call, and a job's seq is formatted when it is handed out and again at its ack. Each table
-- is a function of the number alone (never of stored data), emptied when it grows large.
local function memo(format)
  local known, n = {}, 0
  return function(x)
    local text = known[x]
    if text == nil then
      text = string.format(format, x)
      if n >= 4096 then known, n = {}, 0 end
      known[x], n = text, n + 1
    end
    return text
  end
end
local int, pad10, pad16 = memo('%d'), memo('%010d'), memo('%016d')
local function pad(n, width) if width == 10 then return pad10(n) end return pad16(n) end
local function opt(s) if s == '' or s == nil then return nil end return tonumber(s) end
local function optfmt(x) if x == nil then return '' end return fmt(x) end
local function optint(x) if x == nil then return '' end return int(x) end

-- Python's max(a, b): the first argument unless the second is strictly greater.
local function max2(a, b) if b > a then return b end return a end
-- Python's min(a, b): the first argument unless the second is strictly less.
local function min2(a, b) if b < a then return b end return a end

-- The time of the running call's event, from its `now` argument (the time of an event is the
-- time the store performs it: docs/internals/scheduler.md, "Why these rules"). '>N' (clock=store, the default, and every
-- dequeue pipelined behind a wait: waiting.py) is max(N, the server's clock): N was the
-- sender's clock when it built the call, stale by the time a call that waited for a
-- reconnect, a re-send or a BLPOP runs; the server's clock is not, and taking the later of
-- the two never moves time back. A plain number (clock=caller: a virtual clock) is the time.
-- The server's clock is read once per call, so every `now` of a call agrees.
local function now_of(arg)
  if string.byte(arg, 1) ~= 62 then return tonumber(arg) end
  if server_now == nil then
    local t = redis.call('TIME')
    server_now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  end
  return max2(tonumber(string.sub(arg, 2)), server_now)
end

-- -- records ------------------------------------------------------------------------------

-- A record is struct.pack(format, mask, fixed fields..., present optional fields...): mask
-- (2 bytes) has bit i - 1 set when optional field i is present (records.py reads the same
-- layout). Each record has its own decode and encode below, written out field by field:
-- a table built by one constructor naming every field is sized once, where filling one
-- field at a time regrows it several times, and every C call (bit.band, unpack) costs about
-- as much as a short Lua loop. `formats` builds a layout's format per mask, once.
local function formats(head, optional)
  local cache = {}
  return function(mask)
    local found = cache[mask]
    if found == nil then
      found = head
      local m = mask
      for i = 1, #optional do
        if m % 2 == 1 then found = found .. optional[i] end
        m = (m - m % 2) / 2
      end
      cache[mask] = found
    end
    return found
  end
end

local function split(s)
  local out, n = {}, 0
  for v in string.gmatch(s .. ',', '([^,]*),') do n = n + 1; out[n] = v end
  return out
end

-- ready_at as 8 bytes whose byte order is the order of the doubles (IEEE 754 trick).
local function sortable(x)
  local s = struct.pack('>d', x)
  local b1 = string.byte(s, 1)
  if b1 >= 128 then
    local t = {}
    for i = 1, 8 do t[i] = string.char(255 - string.byte(s, i)) end
    return table.concat(t)
  end
  return string.char(b1 + 128) .. string.sub(s, 2)
end

-- -- rates and history (fairq/policy/rate.py, history.py) ------------------------------------

-- A rate limit {count, period, burst} from its stored fields, or nil ('' or absent).
local function rate_from(count, period, burst)
  if count == nil or count == false or count == '' then return nil end
  return {count = tonumber(count), period = tonumber(period), burst = tonumber(burst)}
end

local function interval_of(r) return r.period / r.count end
local function tolerance_of(r) return interval_of(r) * (r.burst - 1) end

-- rate.limited_until: when a tenant with this tat may start its next job, nil if now.
local function gcra_until(tat, now, r)
  if tat == nil then return nil end
  local allowed = tat - tolerance_of(r)
  if allowed > now then return allowed end
  return nil
end

-- history.decayed and history.add_usage.
local function decayed(usage, since, now, half_life)
  if now <= since then return usage end
  return usage * math.pow(0.5, (now - since) / half_life)
end

local function add_usage(usage, since, now, half_life, amount)
  return max2(decayed(usage, since, now, half_life) + amount, 0.0)
end

-- -- queues ---------------------------------------------------------------------------------

-- A queue's key names, by its meta key. keys.py builds every block from one prefix and
-- queue name, so the meta key fixes the others (all but fig, the block's last key, set by
-- open_queue); the table lasts across calls (it is a
-- function of the names alone, not of stored data), and is dropped when many piled up.
local blocks, nblocks = {}, 0

local function keys_of(base)
  local k = blocks[KEYS[base + 1]]
  if k == nil then
    k = {
      meta = KEYS[base + 1], tenants = KEYS[base + 2], tids = KEYS[base + 3],
      tnames = KEYS[base + 4], eligible = KEYS[base + 5], ready = KEYS[base + 6],
      readyat = KEYS[base + 7], scheduled = KEYS[base + 8], running = KEYS[base + 9],
      dead = KEYS[base + 10], done = KEYS[base + 11], jobs = KEYS[base + 12],
      bodies = KEYS[base + 13], errors = KEYS[base + 14], backlog = KEYS[base + 15],
      wake = KEYS[base + 16], limited = KEYS[base + 17], tats = KEYS[base + 18],
      progress = KEYS[base + 19], results = KEYS[base + 20], expiring = KEYS[base + 21],
      costs = KEYS[base + 22],
    }
    if nblocks >= 1000 then blocks, nblocks = {}, 0 end
    blocks[k.meta], nblocks = k, nblocks + 1
  end
  return k
end

-- A queue's defaults in one value, meta's `conf`: weight, cap, rate count, period, burst,
-- half_life, max_debt, maxf as doubles (NaN: none), each as the separate fields records.py
-- reads give it back (cap, count, burst and maxf whole). One HMGET of V, due and conf costs
-- about half of reading ten fields. A conf of the seven doubles before maxf (CONF7, written
-- by an earlier fairq) is read as having no maxf.
local CONF, CONF7, NAN = '>dddddddd', '>ddddddd', 0 / 0
local function conf_of(q)
  local r, cap, half_life, maxf = q.rate, NAN, NAN, NAN
  local count, period, burst = NAN, NAN, NAN
  if q.cap ~= nil then cap = tonumber(int(q.cap)) end
  if r ~= nil then
    count, period, burst = tonumber(int(r.count)), r.period, tonumber(int(r.burst))
  end
  if q.half_life ~= nil then half_life = q.half_life end
  if q.maxf ~= nil then maxf = tonumber(int(q.maxf)) end
  return struct.pack(CONF, q.weight, cap, count, period, burst, half_life, q.max_debt, maxf)
end

local function some(x) if x ~= x then return nil end return x end

-- q's defaults from conf; a queue without conf (never configured, or written by an earlier
-- fairq) reads the separate fields, and gets its conf at the end of the call.
local function load_defaults(q, conf)
  if conf then
    local w, cap, count, period, burst, half_life, max_debt, maxf
    if #conf == 56 then
      w, cap, count, period, burst, half_life, max_debt = struct.unpack(CONF7, conf)
      maxf, q.confdirty = NAN, true
    else
      w, cap, count, period, burst, half_life, max_debt, maxf = struct.unpack(CONF, conf)
    end
    q.weight, q.cap, q.half_life, q.max_debt = w, some(cap), some(half_life), max_debt
    q.maxf = some(maxf)
    if count == count then q.rate = {count = count, period = period, burst = burst} end
    return
  end
  local m = redis.call('HMGET', q.k.meta, 'weight', 'cap', 'rcount', 'rperiod', 'rburst',
    'half_life', 'max_debt', 'maxf')
  q.weight, q.cap, q.rate = opt(m[1]) or 1.0, opt(m[2]), rate_from(m[3], m[4], m[5])
  q.half_life, q.max_debt, q.confdirty = opt(m[6]), opt(m[7]) or 60.0, true
  q.maxf = opt(m[8])
end

-- The queue's leased jobs: one member of running each.
local function in_flight(q) return redis.call('ZCARD', q.k.running) end

-- Whether the queue is at (or over) its cap on leased jobs, max_in_flight (maxf).
local function is_full(q) return q.maxf ~= nil and in_flight(q) >= q.maxf end

-- meta's `due` (nil: unknown) is at or below every score in scheduled, running and limited,
-- so before it nothing is due and a dequeue skips maintenance (`maintain_queue`). A capped
-- queue notes whether it is full as the call starts (full0), for `wake_waiters`.
local function open_queue(block, name)
  local k = keys_of((block - 1) * QUEUE_KEYS)
  k.fig = KEYS[block * QUEUE_KEYS]  -- this call's slot: not kept with the others
  local m = redis.call('HMGET', k.meta, 'V', 'due', 'conf')
  local q = {
    k = k, block = block, name = name, V = opt(m[1]) or 0.0, due = opt(m[2]), weight = 1.0,
    cap = nil, rate = nil, half_life = nil, max_debt = 60.0, maxf = nil, full0 = false,
    vdirty = false, duedirty = false, confdirty = false, tenants = {}, named = {}, dirty = {},
    wake = 0, pending = {}, npending = 0, figs = {}, nfigs = 0, seq = nil, seqdirty = false,
    newcosts = nil,
  }
  load_defaults(q, m[3])
  q.full0 = is_full(q)
  return q
end

-- The enqueue order number of the queue's next job: above its last one, and at least
-- `floor` (enqueue.lua says why). Read from meta once per call, written back by `save_meta`.
local function next_seq(q, floor)
  if q.seq == nil then q.seq = tonumber(redis.call('HGET', q.k.meta, 'seq')) or 0 end
  local seq = q.seq + 1
  if floor > seq then seq = floor end
  q.seq, q.seqdirty = seq, true
  return seq
end

-- Write back what the call changed in meta: V, due, conf, seq.
local function save_meta(q)
  local f, n = {}, 0
  if q.seqdirty then f[n + 1], f[n + 2], n = 'seq', string.format('%d', q.seq), n + 2 end
  if q.vdirty then f[n + 1], f[n + 2], n = 'V', fmt(q.V), n + 2 end
  if q.duedirty then f[n + 1], f[n + 2], n = 'due', fmt(q.due), n + 2 end
  if q.confdirty then f[n + 1], f[n + 2], n = 'conf', conf_of(q), n + 2 end
  if n > 0 then redis.call('HSET', q.k.meta, unpack(f, 1, n)) end
  q.vdirty, q.duedirty, q.confdirty, q.seqdirty = false, false, false, false
end

-- Add `member` at `score` to scheduled, running or limited (key), keeping `due` below it.
local function pend(q, key, score, member)
  redis.call('ZADD', key, fmt(score), member)
  if q.due ~= nil and score < q.due then q.due, q.duedirty = score, true end
end

-- -- end of _lib.lua (continued by _lib_tenants.lua) --------------------------
