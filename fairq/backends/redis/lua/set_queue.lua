-- set_queue.lua: store a queue's defaults, then resettle every tenant they can change.
--
-- KEYS: G keys shared by queues, then one block of QUEUE_KEYS keys: the queue (see
--       _lib.lua). On a single Redis (G = 1): [1] the queues set; on a Redis Cluster (G = 0)
--       the caller registers the queue itself (backend.py).
-- ARGV: [1] queue name, [2] weight, [3] cap ('' for none), [4] rate count, [5] rate period,
--       [6] rate burst ('' x3 for no rate), [7] half_life ('' for none), [8] max_debt, [9] now
--       (see `now_of`), [10] max_in_flight ('' for none), [11] G. Any setting may be 'keep'
--       (the rate's three): it stays as stored, read in this same call.
-- Touches: the queues set (single Redis); meta, tenants, tids (read), tnames (read),
--       eligible, ready (read), backlog (read), limited, tats, wake, running (read: ZCARD).
-- Returns: the number of tenants resettled.
--
-- Resettling a tenant (recompute its rate hold, then refresh) can only change one that has
-- ready jobs (backlog), is held now (limited), or has tat > now (tats: the only tenants a
-- new rate can hold). Every other tenant's resettle is a no-op, so the cost is O(those
-- tenants), never a scan of the queue's tenants.

register('set_queue', function()
  local queues = take_globals(ARGV[11])[1]
  if queues then redis.call('SADD', queues, ARGV[1]) end
  local now = now_of(ARGV[9])
  local q = open_queue(1, ARGV[1])
  if ARGV[2] ~= 'keep' then q.weight = tonumber(ARGV[2]) end
  if ARGV[3] ~= 'keep' then q.cap = opt(ARGV[3]) end
  if ARGV[4] ~= 'keep' then q.rate = rate_from(ARGV[4], ARGV[5], ARGV[6]) end
  if ARGV[7] ~= 'keep' then q.half_life = opt(ARGV[7]) end
  if ARGV[8] ~= 'keep' then q.max_debt = tonumber(ARGV[8]) end
  -- q.full0 is still as the old cap had it: raising it wakes waiters
  if ARGV[10] ~= 'keep' then q.maxf = opt(ARGV[10]) end
  local count, period, burst = rate_fields(q.rate)
  redis.call('HSET', q.k.meta, 'weight', fmt(q.weight), 'cap', optint(q.cap), 'rcount', count,
    'rperiod', period, 'rburst', burst, 'half_life', optfmt(q.half_life),
    'max_debt', fmt(q.max_debt), 'maxf', optint(q.maxf))
  q.confdirty = true  -- the same defaults in one value, for open_queue

  redis.call('ZREMRANGEBYSCORE', q.k.tats, '-inf', fmt(now))
  local seen = {}
  local function settle(tid)
    if seen[tid] then return end
    seen[tid] = true
    resettle(q, tenant(q, tid), now)
  end
  for _, tidp in ipairs(redis.call('SMEMBERS', q.k.backlog)) do settle(tonumber(tidp)) end
  for _, tidp in ipairs(redis.call('ZRANGE', q.k.tats, 0, -1)) do settle(tonumber(tidp)) end
  for _, name in ipairs(redis.call('ZRANGE', q.k.limited, 0, -1)) do
    settle(tonumber(redis.call('HGET', q.k.tids, name)))
  end
  flush(q)
  local n = 0
  for _ in pairs(seen) do n = n + 1 end
  return n
end)
