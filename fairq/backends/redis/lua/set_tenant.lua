-- set_tenant.lua: change one tenant's weight, cap and/or rate in one queue, then resettle it.
--
-- KEYS: G keys shared by queues, then one block of QUEUE_KEYS keys: the queue (see
--       _lib.lua). On a single Redis (G = 1): [1] the queues set; on a Redis Cluster (G = 0)
--       the caller registers the queue itself (backend.py).
-- ARGV: [1] queue name, [2] tenant, [3] weight (0 pauses), [4] cap, [5] rate as
--       'count,period,burst': each 'keep', '' (back to the queue default) or a value;
--       [6] now (see `now_of`), [7] G.
-- Touches: the queues set (single Redis); meta, tenants, tids, tnames, eligible, ready
--       (read), readyat (read), limited, wake.
-- Returns: {tenant record, oldest readyat member or false, queue weight, queue cap or '',
--       queue rate 'count,period,burst' or '', queue half_life or '', queue max_debt, now}:
--       now is the time the call ran at (its usage is decayed to it).

register('set_tenant', function()
  local queues = take_globals(ARGV[7])[1]
  if queues then redis.call('SADD', queues, ARGV[1]) end
  local now = now_of(ARGV[6])
  local q = open_queue(1, ARGV[1])
  local t = tenant_named(q, ARGV[2])
  if ARGV[3] ~= 'keep' then t.weight = opt(ARGV[3]) end
  if ARGV[4] ~= 'keep' then t.cap = opt(ARGV[4]) end
  if ARGV[5] ~= 'keep' then
    local f = split(ARGV[5])
    t.rate = rate_from(f[1], f[2], f[3])
  end
  resettle(q, t, now)
  flush(q)
  local queue_rate = ''
  if q.rate ~= nil then queue_rate = table.concat({rate_fields(q.rate)}, ',') end
  return {tenant_record(t), oldest_member(q, t), fmt(q.weight), optint(q.cap), queue_rate,
    optfmt(q.half_life), fmt(q.max_debt), fmt(now)}
end)
