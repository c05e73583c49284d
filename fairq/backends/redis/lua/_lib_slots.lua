-- _lib_slots.lua: shared helpers for tenant slots (fairq/policy/slots.py), the third part of
-- the library (after _lib.lua and _lib_jobs.lua, before the operations' files). It only
-- defines local functions.
--
-- A (queue, tenant)'s slots are two keys in the queue's Cluster slot (keys.py: slot_keys):
--   slots     zset   nonce -> deadline (a slot is held while now < deadline)
--   slotinfo  hash   nonce -> lease .. ':' .. holder (the lease renewals extend by)
-- Both exist only while the tenant holds a slot there, and expire with its last deadline, so
-- a tenant whose holders all died leaves nothing behind. Its line of parked jobs is two more:
--   waiting   zset   place -> when first parked (the wakeable ones)
--   waiters   hash   place -> since .. ':' .. park text (every parked job, woken or not)
-- Both expire PARK_TTL after their last change (each timed copy of a parked job changes them).

-- Drop the slots whose deadline is at or before now.
local function slots_drop_expired(held, info, now)
  local gone = redis.call('ZRANGEBYSCORE', held, '-inf', fmt(now))
  if #gone == 0 then return end
  redis.call('ZREMRANGEBYSCORE', held, '-inf', fmt(now))
  for i = 1, #gone, 1000 do  -- unpack has a limit: at most 1000 arguments a call
    redis.call('HDEL', info, unpack(gone, i, math.min(i + 999, #gone)))
  end
end

-- Let both keys expire with the last deadline (relative to now, so a virtual clock works
-- too), or delete them when no slot is left.
local function slots_expire(held, info, now)
  local last = redis.call('ZRANGE', held, '-1', '-1', 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', held, info)
    return
  end
  local ms = string.format('%d', math.max(1, math.ceil((tonumber(last[2]) - now) * 1000)))
  redis.call('PEXPIRE', held, ms)
  redis.call('PEXPIRE', info, ms)
end

-- The tenant's cap in queue q: its own max_running, else the queue's default, else nil.
-- Reads only: a tenant the queue has not seen is not created.
local function slots_cap(q, name)
  local tid = redis.call('HGET', q.k.tids, name)
  if not tid then return q.cap end
  local t = tenant_from(q, tonumber(tid), tid, redis.call('HGET', q.k.tenants, tid))
  return cap_of(q, t)
end

-- The deadline of the slot `nonce` in the pair of keys `held`, `info` if it is held at now,
-- else nil; an expired slot is dropped on the way.
local function slot_held(held, info, nonce, now)
  local deadline = redis.call('ZSCORE', held, nonce)
  if not deadline then return nil end
  if tonumber(deadline) <= now then
    redis.call('ZREM', held, nonce)
    redis.call('HDEL', info, nonce)
    return nil
  end
  return tonumber(deadline)
end

-- Park (or park again) the job at `place` with its `park` text: wakeable, in line at the time
-- it was first parked (`now` for a new place). Both line keys live PARK_TTL ms on.
local function waiter_park(waiting, waiters, place, park, now, ttl_ms)
  local since = fmt(now)
  local known = redis.call('HGET', waiters, place)
  if known then since = string.match(known, '^[^:]*') end
  redis.call('HSET', waiters, place, since .. ':' .. park)
  redis.call('ZADD', waiting, since, place)
  redis.call('PEXPIRE', waiting, ttl_ms)
  redis.call('PEXPIRE', waiters, ttl_ms)
end

-- The place and park text (place .. ':' .. text) of the oldest wakeable parked job, now woken
-- (no longer wakeable, still parked), or '' when none waits.
local function waiter_wake(waiting, waiters)
  while true do
    local first = redis.call('ZPOPMIN', waiting)
    if #first == 0 then return '' end
    local known = redis.call('HGET', waiters, first[1])
    if known then
      return first[1] .. string.sub(known, string.len(string.match(known, '^[^:]*')) + 1)
    end
  end
end

-- -- end of _lib_slots.lua --------------------------------------------------------------------
