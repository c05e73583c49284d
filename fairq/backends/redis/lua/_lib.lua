-- _lib.lua: shared helpers, the start of the one Redis Functions library fairq loads.
--
-- scripts.py builds the library: a header naming it (it defines LIBRARY, the library name),
-- this file, _lib_jobs.lua, then one file per operation. Each operation file registers one
-- function with `register` below and states its own contract (KEYS, ARGV, keys touched,
-- return value). The helpers are created once, when the library is loaded, not per call.
--
-- Layout (docs in fairq/backends/redis/keys.py). Every per-queue key carries the hash tag
-- {queue}; a queue's keys arrive in KEYS as one block of QUEUE_KEYS consecutive names:
--   meta      hash   V (virtual clock), ntid (tenant id counter), layout (LAYOUT, written
--                    with the first tenant), and the queue defaults: weight, cap,
--                    rcount/rperiod/rburst (rate), half_life, max_debt
--   tenants   hash   tid -> binary record (TENANT below): F, ready, scheduled, running,
--                    succeeded, failed, dead, usage, usage_at, kept (succeeded jobs still
--                    stored); optional S, weight, cap, eseq, tat, limited_until, rcount,
--                    rperiod, rburst. Pruning a tenant's last stored job may forget it
--                    (`forget`): its fields in tenants, tids and tnames go; a returning
--                    tenant gets a new tid
--   tids      hash   tenant name (exact bytes) -> tid
--   tnames    hash   tid -> tenant name
--   eligible  zset   score S, member head_seq(16) .. tid(10): order is exactly (S, head_seq)
--   ready     zset   all scores 0, member tid(10) .. prio(10) .. seq(16) .. job_id (lex order)
--   readyat   zset   all scores 0, member tid(10) .. sortable(ready_at)(8) .. seq(16)
--   scheduled zset   score run_at, member seq(16) .. job_id: order (run_at, seq)
--   running   zset   score deadline, member seq(16) .. job_id: order (deadline, seq)
--   dead      zset   score finished_at, member seq(16) .. job_id
--   done      zset   score finished_at, member seq(16) .. job_id (succeeded, for pruning)
--   jobs      hash   job_id -> binary record (JOB in _lib_jobs.lua): state, seq, tid,
--                    priority, max_attempts, attempts, leases, enqueued_at, run_at,
--                    lease_timeout, cost, charged; optional ready_at, started_at, deadline,
--                    finished_at
--   bodies    hash   job_id -> len(name) .. ":" .. name .. payload (never parsed here)
--   errors    hash   job_id -> last error text
--   backlog   set    tids with ready > 0 (what set_queue must refresh)
--   wake      list   wake-up tokens for idle workers (BLPOP), trimmed to WAKE_MAX
--   limited   zset   score limited_until, member the tenant's name (exact UTF-8 bytes): equal
--                    scores order by memcmp of UTF-8, which is code point order, so the zset
--                    order is exactly the model's (limited_until, tenant) tuple order
--   tats      zset   score tat, member tid(10): tenants whose GCRA tat may still hold them
--                    (set_queue resettles these; entries with tat <= now are trimmed there)
--
-- Records are struct.pack layouts (see `codec`): a double packed and unpacked is the same
-- double, and the C side does the work that parsing text did. Floats in other places (zset
-- scores, meta) are string.format('%.17g', x), which reads back to the same double.
-- The tag arithmetic copies fairq/policy/fairness.py, rate.py and history.py expression for
-- expression (math.pow is C pow, as Python's math.pow), so every double is bit-identical.

local QUEUE_KEYS = 18
local TIDW, SEQW, PRIOW = 10, 16, 10
local MIN_CHARGE = 0.001
local DEFAULT_HALF_LIFE = 60.0
local WAKE_MAX, WAKE_PER_CALL = 64, 8
local PRIO_TOP = 2147483647
-- The record layout version (LAYOUT in keys.py), kept in each queue's meta.
local LAYOUT = '2'

-- The KEYS and ARGV of the running call: a function receives them as arguments, and the
-- helpers read them as a script would (Redis runs one call at a time).
local KEYS, ARGV = {}, {}

-- Register operation `name` as the function LIBRARY .. '_' .. name.
local function register(name, body)
  redis.register_function(LIBRARY .. '_' .. name, function(keys, args)
    KEYS, ARGV = keys, args
    return body()
  end)
end

-- string.format costs as much as a redis.call, so fmt remembers its last answer (one call
-- formats `now` many times); 0 is always formatted, as 0 == -0 but '0' ~= '-0'.
local last_x, last_text = nil, nil
local function fmt(x)
  if x ~= last_x or x == 0 then last_x, last_text = x, string.format('%.17g', x) end
  return last_text
end
local function int(x) return string.format('%d', x) end
local PAD = {[10] = '%010d', [16] = '%016d'}
local function pad(n, width) return string.format(PAD[width], n) end
local function opt(s) if s == '' or s == nil then return nil end return tonumber(s) end
local function optfmt(x) if x == nil then return '' end return fmt(x) end
local function optint(x) if x == nil then return '' end return int(x) end

-- Python's max(a, b): the first argument unless the second is strictly greater.
local function max2(a, b) if b > a then return b end return a end
-- Python's min(a, b): the first argument unless the second is strictly less.
local function min2(a, b) if b < a then return b end return a end

-- -- records ------------------------------------------------------------------------------

-- A record is struct.pack(format, mask, fixed fields..., present optional fields...): mask
-- (2 bytes) has bit i - 1 set when optional field i is present. fixed and optional are lists
-- of {name, struct code}; a table's fields of those names are read and written. An absent
-- optional field is nil (or '' for a string). Each mask's format and present names are
-- built once; the loops are numeric and call no C function, as every such call costs. (codec
-- runs when the library loads, where Redis offers no library functions such as ipairs.)
local BIT = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}

local function codec(fixed, optional)
  local head = '>H'
  local nfixed, nopt = #fixed, #optional
  for i = 1, nfixed do head = head .. fixed[i][2] end
  local layouts = {}
  local function layout(mask)
    local found = layouts[mask]
    if found == nil then
      found = {format = head, names = {}}
      for i = 1, nopt do
        if bit.band(mask, BIT[i]) ~= 0 then
          found.format = found.format .. optional[i][2]
          found.names[#found.names + 1] = optional[i][1]
        end
      end
      layouts[mask] = found
    end
    return found
  end
  local function decode(raw, into)
    local l = layout(string.byte(raw, 1) * 256 + string.byte(raw, 2))
    local v = {struct.unpack(l.format, raw)}
    for i = 1, nfixed do into[fixed[i][1]] = v[i + 1] end
    local names = l.names
    for i = 1, #names do into[names[i]] = v[nfixed + 1 + i] end
    return into
  end
  local function encode(t)
    local mask, v, n = 0, {0}, nfixed + 1
    for i = 1, nfixed do v[i + 1] = t[fixed[i][1]] end
    for i = 1, nopt do
      local x = t[optional[i][1]]
      if x ~= nil and x ~= '' then mask = mask + BIT[i]; n = n + 1; v[n] = x end
    end
    v[1] = mask
    return struct.pack(layout(mask).format, unpack(v, 1, n))
  end
  return decode, encode
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

local function open_queue(block, name)
  local base = (block - 1) * QUEUE_KEYS
  local k = {
    meta = KEYS[base + 1], tenants = KEYS[base + 2], tids = KEYS[base + 3],
    tnames = KEYS[base + 4], eligible = KEYS[base + 5], ready = KEYS[base + 6],
    readyat = KEYS[base + 7], scheduled = KEYS[base + 8], running = KEYS[base + 9],
    dead = KEYS[base + 10], done = KEYS[base + 11], jobs = KEYS[base + 12],
    bodies = KEYS[base + 13], errors = KEYS[base + 14], backlog = KEYS[base + 15],
    wake = KEYS[base + 16], limited = KEYS[base + 17], tats = KEYS[base + 18],
  }
  local m = redis.call('HMGET', k.meta, 'V', 'weight', 'cap', 'rcount', 'rperiod', 'rburst',
    'half_life', 'max_debt')
  return {
    k = k, name = name, V = opt(m[1]) or 0.0, weight = opt(m[2]) or 1.0, cap = opt(m[3]),
    rate = rate_from(m[4], m[5], m[6]), half_life = opt(m[7]), max_debt = opt(m[8]) or 60.0,
    vdirty = false, tenants = {}, dirty = {}, wake = 0,
  }
end

-- -- tenants --------------------------------------------------------------------------------

-- The tenant record (TENANT_FIXED/TENANT_OPTIONAL in records.py).
local tenant_decode, tenant_encode = codec(
  {{'F', 'd'}, {'ready', 'I4'}, {'scheduled', 'I4'}, {'running', 'I4'}, {'succeeded', 'd'},
   {'failed', 'd'}, {'dead', 'd'}, {'usage', 'd'}, {'usage_at', 'd'}, {'kept', 'I4'}},
  {{'S', 'd'}, {'weight', 'd'}, {'cap', 'd'}, {'eseq', 'c16'}, {'tat', 'd'}, {'lim', 'd'},
   {'rcount', 'd'}, {'rperiod', 'd'}, {'rburst', 'd'}})

-- A stored tenant. Between calls the eligible index holds (S, eseq) for it exactly when eseq
-- is not '', and eseq is then its head's seq (every change of a tenant's ready jobs is
-- followed by `index`), so hseq (its head's seq, nil: unknown) and iS (the score in the
-- index) start from them; `index` uses them to skip what it already knows.
local function tenant_from(q, tid, tids, raw)
  local t = tenant_decode(raw, {tid = tid, tidp = pad(tid, TIDW), tids = tids, eseq = ''})
  t.rate = rate_from(t.rcount, t.rperiod, t.rburst)
  if t.eseq ~= '' then t.hseq, t.iS = t.eseq, t.S end
  return t
end

local function rate_fields(r)
  if r == nil then return '', '', '' end
  return int(r.count), fmt(r.period), int(r.burst)
end

local function tenant_record(t)
  local r = t.rate or {}
  t.rcount, t.rperiod, t.rburst = r.count, r.period, r.burst
  return tenant_encode(t)
end

local function touch(q, t)
  q.dirty[t.tid] = t
  return t
end

-- The tenant with id tid (a number), loaded once per script call.
local function tenant(q, tid)
  local t = q.tenants[tid]
  if t == nil then
    local tids = int(tid)
    t = tenant_from(q, tid, tids, redis.call('HGET', q.k.tenants, tids))
    q.tenants[tid] = t
  end
  return touch(q, t)
end

-- The tenant named name, created (F = 0, no settings) when the queue has not seen it.
local function tenant_named(q, name)
  local tid = redis.call('HGET', q.k.tids, name)
  if tid then return tenant(q, tonumber(tid)) end
  local n = redis.call('HINCRBY', q.k.meta, 'ntid', 1)
  if n == 1 then redis.call('HSET', q.k.meta, 'layout', LAYOUT) end
  redis.call('HSET', q.k.tids, name, int(n))
  redis.call('HSET', q.k.tnames, int(n), name)
  local t = {
    tid = n, tidp = pad(n, TIDW), tids = int(n), F = 0.0, ready = 0, scheduled = 0, running = 0,
    succeeded = 0, failed = 0, dead = 0, usage = 0.0, usage_at = 0.0, kept = 0, eseq = '',
    name = name,
  }
  q.tenants[n] = t
  return touch(q, t)
end

-- The tenant's name (its member in the limited zset), read once per call.
local function name_of(q, t)
  if t.name == nil then t.name = redis.call('HGET', q.k.tnames, t.tids) end
  return t.name
end

local function weight_of(q, t) if t.weight ~= nil then return t.weight end return q.weight end
local function cap_of(q, t) if t.cap ~= nil then return t.cap end return q.cap end
local function rate_of(q, t) if t.rate ~= nil then return t.rate end return q.rate end
local function usage_half_life(q) return q.half_life or DEFAULT_HALF_LIFE end

-- fairness.is_eligible: work waiting, under its cap, not paused (weight 0), not rate-limited.
local function is_eligible(q, t)
  local cap = cap_of(q, t)
  return t.ready > 0 and (cap == nil or t.running < cap) and weight_of(q, t) > 0
    and t.lim == nil
end

-- The first `n` members of the tenant's ready FIFO (priority DESC, seq ASC).
local function heads(q, t, n)
  local hi = '(' .. pad(t.tid + 1, TIDW)
  return redis.call('ZRANGEBYLEX', q.k.ready, '[' .. t.tidp, hi, 'LIMIT', 0, n)
end

-- The seq of a ready member (nil: none).
local function ready_seq(m)
  if m == nil then return '' end
  return string.sub(m, TIDW + PRIOW + 1, TIDW + PRIOW + SEQW)
end

-- Record the tenant's current (S, head_seq) in the eligible index (or take it out).
local function index(q, t)
  local seq = ''
  if t.S ~= nil then
    if t.hseq == nil then t.hseq = ready_seq(heads(q, t, 1)[1]) end
    seq = t.hseq
  end
  if t.eseq ~= '' and t.eseq ~= seq then
    redis.call('ZREM', q.k.eligible, t.eseq .. t.tidp)
  end
  if seq ~= '' then
    if seq ~= t.eseq or t.S ~= t.iS then
      redis.call('ZADD', q.k.eligible, fmt(t.S), seq .. t.tidp)
    end
    if t.eseq == '' then q.wake = q.wake + 1 end
  end
  t.eseq, t.iS = seq, t.S
end

-- "Refresh": newly eligible -> S = max(F, V) (a returning tenant on a queue with a half-life:
-- history.history_start); not eligible -> no S; else S stays.
local function refresh(q, t, now, returning)
  if not is_eligible(q, t) then
    t.S = nil
  elseif t.S == nil then
    if returning and q.half_life ~= nil then
      local debt = decayed(t.usage, t.usage_at, now, q.half_life)
      t.S = max2(t.F, q.V + min2(debt, q.max_debt))
      t.F = t.S  -- carried in F, so a later retag keeps the debt
    else
      t.S = max2(t.F, q.V)
    end
  end
  index(q, t)
end

-- After a run's cost is settled: an eligible tenant starts again at max(F, V).
local function retag(q, t)
  if is_eligible(q, t) then t.S = max2(t.F, q.V) else t.S = nil end
  index(q, t)
end

-- Move the finish tag; the same amount is recorded as recent service (rules.set_finish).
local function set_finish(q, t, finish, now)
  t.usage = add_usage(t.usage, t.usage_at, now, usage_half_life(q), finish - t.F)
  t.usage_at = max2(t.usage_at, now)
  t.F = finish
end

-- Hold the tenant out of the eligible index until limited_until (nil: not held).
local function set_limited(q, t, limited)
  if limited ~= nil then
    redis.call('ZADD', q.k.limited, fmt(limited), name_of(q, t))
  elseif t.lim ~= nil then
    redis.call('ZREM', q.k.limited, name_of(q, t))
  end
  t.lim = limited
end

-- rules.limit_until: recompute the rate hold from tat under the tenant's current rate.
local function limit_until(q, t, now)
  local r = rate_of(q, t)
  local limited = nil
  if r ~= nil then limited = gcra_until(t.tat, now, r) end
  set_limited(q, t, limited)
end

-- Settings changed: recompute the rate hold, then eligibility.
local function resettle(q, t, now)
  limit_until(q, t, now)
  refresh(q, t, now, false)
end

-- policy.tenant.forgettable: no job stored for it, no settings of its own, and a tat that
-- cannot matter any more (GCRA gives a new tenant's results for a tat <= now).
local function forgettable(t, now)
  return t.ready + t.scheduled + t.running + t.dead + t.kept == 0
    and t.weight == nil and t.cap == nil and t.rate == nil
    and (t.tat == nil or t.tat <= now)
end

-- Delete every trace of a forgettable tenant. It has no ready job, so no member in eligible,
-- ready, readyat or backlog; a rate hold over but not yet ended is dropped with it.
local function forget(q, t)
  local name = name_of(q, t)
  redis.call('HDEL', q.k.tenants, t.tids)
  redis.call('HDEL', q.k.tids, name)
  redis.call('HDEL', q.k.tnames, t.tids)
  redis.call('ZREM', q.k.tats, t.tidp)
  if t.lim ~= nil then redis.call('ZREM', q.k.limited, name) end
  q.dirty[t.tid] = nil
  q.tenants[t.tid] = nil
end

-- -- end of _lib.lua (continued by _lib_jobs.lua) ------------------------------------------
