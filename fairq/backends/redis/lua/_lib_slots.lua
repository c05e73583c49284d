-- _lib_slots.lua: shared helpers for tenant slots (fairq/policy/slots.py), the third part of
-- the library (after _lib.lua and _lib_jobs.lua, before the operations' files). It only
-- defines local functions.
--
-- A (queue, tenant)'s slots are two keys in the queue's Cluster slot (keys.py: slot_keys):
--   slots     zset   nonce -> deadline (a slot is held while now < deadline)
--   slotinfo  hash   nonce -> lease .. ':' .. holder (the lease renewals extend by)
-- Both exist only while the tenant holds a slot there, and expire with its last deadline, so
-- a tenant whose holders all died leaves nothing behind.

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

-- -- end of _lib_slots.lua --------------------------------------------------------------------
