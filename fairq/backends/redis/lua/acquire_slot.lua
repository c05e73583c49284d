-- acquire_slot.lua: take one of a tenant's slots in a queue, if fewer than its cap are held.
--
-- KEYS: one block of QUEUE_KEYS keys: the queue (see _lib.lua: read for the cap only), then
--       [QUEUE_KEYS + 1] the tenant's slots zset and [QUEUE_KEYS + 2] its slotinfo hash
--       (_lib_slots.lua).
-- ARGV: [1] now (see `now_of`), [2] tenant, [3] the new slot's nonce, [4] holder, [5] lease
--       (seconds), [6] limit ('': the tenant's max_running, else the queue's, else no cap).
-- Touches: meta, tids, tenants (read); the two slot keys.
-- Returns: {deadline, ''} when the slot is taken; {'', free_at} when refused, free_at the
--       earliest deadline among the slots held. Sent again: the first sending's reply.
--
-- The expired slots go first; then the count of those left decides (policy/slots.py: free).

register_once('acquire_slot', function()
  local now = now_of(ARGV[1])
  local held, info = KEYS[QUEUE_KEYS + 1], KEYS[QUEUE_KEYS + 2]
  slots_drop_expired(held, info, now)
  local cap = opt(ARGV[6])
  if cap == nil then cap = slots_cap(open_queue(1, ''), ARGV[2]) end
  if cap ~= nil and redis.call('ZCARD', held) >= cap then
    local first = redis.call('ZRANGE', held, '0', '0', 'WITHSCORES')
    return {'', first[2]}
  end
  local deadline = now + tonumber(ARGV[5])
  redis.call('ZADD', held, fmt(deadline), ARGV[3])
  redis.call('HSET', info, ARGV[3], ARGV[5] .. ':' .. ARGV[4])
  slots_expire(held, info, now)
  return {fmt(deadline), ''}
end)
