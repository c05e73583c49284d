-- set_tenant.lua: change one tenant's weight and/or cap in one queue, then refresh it.
--
-- KEYS: [1] queues set, then one block of QUEUE_KEYS keys: the queue (see _lib.lua),
--       shifted by one key.
-- ARGV: [1] queue name, [2] tenant, [3] weight, [4] cap: each 'keep', '' (back to the
--       queue default) or a value.
-- Touches: the queues set; meta, tenants, tids, tnames, eligible, ready (read), readyat
--       (read), wake.
-- Returns: {tenant record, oldest readyat member or false, queue weight, queue cap or ''}.

local queues = table.remove(KEYS, 1)
redis.call('SADD', queues, ARGV[1])
local q = open_queue(1, ARGV[1])
local t = tenant_named(q, ARGV[2])
if ARGV[3] ~= 'keep' then t.weight = opt(ARGV[3]) end
if ARGV[4] ~= 'keep' then t.cap = opt(ARGV[4]) end
refresh(q, t)
flush(q)
return {tenant_record(t), oldest_member(q, t), fmt(q.weight), optint(q.cap)}
