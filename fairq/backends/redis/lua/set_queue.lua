-- set_queue.lua: store a queue's default weight and cap; refresh every backlogged tenant.
--
-- KEYS: [1] queues set, then one block of QUEUE_KEYS keys: the queue (see _lib.lua),
--       shifted by one key.
-- ARGV: [1] queue name, [2] weight, [3] cap ('' for none).
-- Touches: the queues set; meta, tenants, eligible, ready (read), backlog (read), wake.
-- Returns: the number of tenants refreshed. Only tenants with ready jobs can change
--       (a refresh of any other tenant is a no-op), so the cost is O(backlogged tenants).

local queues = table.remove(KEYS, 1)
redis.call('SADD', queues, ARGV[1])
local q = open_queue(1, ARGV[1])
redis.call('HSET', q.k.meta, 'weight', fmt(tonumber(ARGV[2])))
if ARGV[3] == '' then
  redis.call('HDEL', q.k.meta, 'cap')
else
  redis.call('HSET', q.k.meta, 'cap', ARGV[3])
end
q.weight = tonumber(ARGV[2])
q.cap = opt(ARGV[3])
local tids = redis.call('SMEMBERS', q.k.backlog)
for _, tidp in ipairs(tids) do refresh(q, tenant(q, tonumber(tidp))) end
flush(q)
return #tids
