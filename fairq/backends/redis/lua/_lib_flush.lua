-- _lib_flush.lua: the end of every operation: write back what the call changed (tenants,
-- meta, learned costs, figures) and wake idle workers. Part of the one library scripts.py
-- loads (NEEDS there says which parts come before it); it only defines locals.

-- The wake-up tokens of a queue with a cap on leased jobs (or one that had it): none while it
-- is full, and its list emptied, since a waiter woken then could take nothing (an idle relay
-- would spin on each enqueue); when the call took it from full to not full (a lease ended, or
-- the cap was raised or removed), one token per job it has room for (at most WAKE_PER_CALL).
local function wake_waiters(q)
  local room = math.huge
  if q.maxf ~= nil then room = q.maxf - in_flight(q) end
  if room <= 0 then
    q.wake = 0
    redis.call('DEL', q.k.wake)
  elseif q.full0 then
    q.wake = q.wake + math.min(room, WAKE_PER_CALL)
  end
  q.full0 = room <= 0
end

-- Write back the tenants and meta fields this call changed; wake idle workers if work
-- appeared.
local function flush(q)
  sync(q)
  for tid, t in pairs(q.dirty) do
    redis.call('HSET', q.k.tenants, t.tids, tenant_record(t))
  end
  q.dirty = {}
  if q.newcosts ~= nil then
    local f, n = {}, 0
    for name, c in pairs(q.newcosts) do
      f[n + 1], f[n + 2], n = name, struct.pack(COST_FORMAT, c.runs, c.mean), n + 2
    end
    redis.call('HSET', q.k.costs, unpack(f, 1, n))
    q.newcosts = nil
  end
  if q.nfigs > 0 then
    for f, n in pairs(q.figs) do redis.call('HINCRBY', q.k.fig, f, n) end
    redis.call('EXPIRE', q.k.fig, FIG_TTL)
    q.figs, q.nfigs = {}, 0
  end
  save_meta(q)
  if q.maxf ~= nil or q.full0 then wake_waiters(q) end
  if q.wake > 0 then
    local tokens = {}
    for i = 1, math.min(q.wake, WAKE_PER_CALL) do tokens[i] = '1' end
    if redis.call('LPUSH', q.k.wake, unpack(tokens)) > WAKE_MAX then
      redis.call('LTRIM', q.k.wake, '0', WAKE_LAST)
    end
    q.wake = 0
  end
end

-- -- end of _lib_flush.lua ------------------------------------------------------------------
