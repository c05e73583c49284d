-- _lib_tenants.lua: the tenants of a queue: records, eligibility index, tags. Part of the one
-- library scripts.py loads (NEEDS there says which parts come before it); it only defines
-- locals.

-- -- tenants --------------------------------------------------------------------------------

-- The tenant record (TENANT_FIXED/TENANT_OPTIONAL in records.py): fixed F, ready,
-- scheduled, running, succeeded, failed, dead, usage, usage_at, kept; optional S, weight,
-- cap, eseq, tat, lim (limited_until), rcount, rperiod, rburst, cancelled (only once > 0).
local tenant_format = formats('>HdI4I4I4dddddI4',
  {'d', 'd', 'd', 'c16', 'd', 'd', 'd', 'd', 'd', 'I4'})

-- A stored tenant. Between calls the eligible index holds (S, eseq) for it exactly when eseq
-- is not '', and eseq is then its head's seq (every change of a tenant's ready jobs is
-- followed by `index`), so hseq (its head's seq, nil: unknown) and iS (the score in the
-- index) start from them; `index` uses them to skip what it already knows.
local function tenant_from(q, tid, tids, raw)
  local hi, mask = string.byte(raw, 1, 2)
  mask = hi * 256 + mask
  local _, F, ready, scheduled, running, succeeded, failed, dead, usage, usage_at, kept,
    a, b, c, d, e, f, g, h, i, l = struct.unpack(tenant_format(mask), raw)
  -- Each optional field takes the next value if its bit is set (the rest move up one).
  local S, weight, cap, eseq, tat, lim, rcount, rperiod, rburst, cancelled
  if mask % 2 == 1 then S, a, b, c, d, e, f, g, h, i = a, b, c, d, e, f, g, h, i, l end
  if mask % 4 >= 2 then weight, a, b, c, d, e, f, g, h = a, b, c, d, e, f, g, h, i end
  if mask % 8 >= 4 then cap, a, b, c, d, e, f, g = a, b, c, d, e, f, g, h end
  if mask % 16 >= 8 then eseq, a, b, c, d, e, f = a, b, c, d, e, f, g else eseq = '' end
  if mask % 32 >= 16 then tat, a, b, c, d, e = a, b, c, d, e, f end
  if mask % 64 >= 32 then lim, a, b, c, d = a, b, c, d, e end
  if mask % 512 >= 64 then rcount, rperiod, rburst, a = a, b, c, d end
  if mask >= 512 then cancelled = a end
  local t = {
    tid = tid, tidp = pad(tid, TIDW), tids = tids, F = F, ready = ready,
    scheduled = scheduled, running = running, succeeded = succeeded, failed = failed,
    dead = dead, usage = usage, usage_at = usage_at, kept = kept, S = S, weight = weight,
    cap = cap, eseq = eseq, tat = tat, lim = lim, rate = rate_from(rcount, rperiod, rburst),
    cancelled = cancelled or 0, hseq = nil, iS = nil, name = nil,
  }
  if eseq ~= '' then t.hseq, t.iS = eseq, S end
  return t
end

-- The tenant's record. Optional fields are taken from the last to the first, each present
-- one going in front of those after it, so the present values end up in field order.
local function tenant_record(t)
  local mask, a, b, c, d, e, f, g, h, i, l = 0, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
  if t.cancelled > 0 then mask, a = 512, t.cancelled end
  local r = t.rate
  if r ~= nil then mask, a, b, c, d = mask + 448, r.count, r.period, r.burst, a end
  if t.lim ~= nil then mask, a, b, c, d, e = mask + 32, t.lim, a, b, c, d end
  if t.tat ~= nil then mask, a, b, c, d, e, f = mask + 16, t.tat, a, b, c, d, e end
  if t.eseq ~= '' and t.eseq ~= nil then
    mask, a, b, c, d, e, f, g = mask + 8, t.eseq, a, b, c, d, e, f
  end
  if t.cap ~= nil then mask, a, b, c, d, e, f, g, h = mask + 4, t.cap, a, b, c, d, e, f, g end
  if t.weight ~= nil then
    mask, a, b, c, d, e, f, g, h, i = mask + 2, t.weight, a, b, c, d, e, f, g, h
  end
  if t.S ~= nil then
    mask, a, b, c, d, e, f, g, h, i, l = mask + 1, t.S, a, b, c, d, e, f, g, h, i
  end
  return struct.pack(tenant_format(mask), mask, t.F, t.ready, t.scheduled, t.running,
    t.succeeded, t.failed, t.dead, t.usage, t.usage_at, t.kept, a, b, c, d, e, f, g, h, i, l)
end

local function rate_fields(r)
  if r == nil then return '', '', '' end
  return int(r.count), fmt(r.period), int(r.burst)
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

-- The tenant named name, created (F = 0, no settings) when the queue has not seen it. A
-- name is looked up once per call (q.named), however many of its jobs a batch holds.
local function tenant_named(q, name)
  local t = q.named[name]
  if t ~= nil then return touch(q, t) end
  local tid = redis.call('HGET', q.k.tids, name)
  if tid then
    t = tenant(q, tonumber(tid))
    t.name, q.named[name] = name, t
    return t
  end
  local n = redis.call('HINCRBY', q.k.meta, 'ntid', '1')
  if n == 1 then redis.call('HSET', q.k.meta, 'layout', LAYOUT) end
  redis.call('HSET', q.k.tids, name, int(n))
  redis.call('HSET', q.k.tnames, int(n), name)
  local t = {
    tid = n, tidp = pad(n, TIDW), tids = int(n), F = 0.0, ready = 0, scheduled = 0, running = 0,
    succeeded = 0, failed = 0, dead = 0, usage = 0.0, usage_at = 0.0, kept = 0, eseq = '',
    cancelled = 0, name = name,
  }
  q.tenants[n], q.named[name] = t, t
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

-- The first `n` members of the tenant's ready FIFO (priority DESC, seq ASC); n is text.
local function heads(q, t, n)
  local hi = '(' .. pad(t.tid + 1, TIDW)
  return redis.call('ZRANGEBYLEX', q.k.ready, '[' .. t.tidp, hi, 'LIMIT', '0', n)
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
    if t.hseq == nil then t.hseq = ready_seq(heads(q, t, '1')[1]) end
    seq = t.hseq
  end
  if t.eseq ~= '' and t.eseq ~= seq then
    redis.call('ZREM', q.k.eligible, t.eseq .. t.tidp .. LONG)
  end
  if seq ~= '' then
    if seq ~= t.eseq or t.S ~= t.iS then
      redis.call('ZADD', q.k.eligible, fmt(t.S), seq .. t.tidp .. LONG)
    end
    -- Newly eligible: wake a worker, unless a job made ready in this call already did.
    if t.eseq == '' and not t.woke then q.wake = q.wake + 1 end
  end
  t.eseq, t.iS = seq, t.S
end

-- `index` the tenant before the eligible index is next read (`sync`): a call that changes
-- one tenant many times (a batch of its jobs) then updates its entry once.
local function reindex(q, t)
  if q.pending[t.tid] == nil then q.pending[t.tid], q.npending = t, q.npending + 1 end
end

local function sync(q)
  if q.npending == 0 then return end
  for _, t in pairs(q.pending) do index(q, t) end
  q.pending, q.npending = {}, 0
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
  reindex(q, t)
end

-- After a run's cost is settled: an eligible tenant starts again at max(F, V).
local function retag(q, t)
  if is_eligible(q, t) then t.S = max2(t.F, q.V) else t.S = nil end
  reindex(q, t)
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
    pend(q, q.k.limited, limited, name_of(q, t))
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
  q.named[name] = nil
  if q.pending[t.tid] ~= nil then q.pending[t.tid], q.npending = nil, q.npending - 1 end
end

-- -- end of _lib_tenants.lua --------------------------------------------------------------
