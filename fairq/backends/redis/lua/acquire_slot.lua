-- acquire_slot.lua: take one of a tenant's slots in a queue, if fewer than its cap are held;
-- else, given a park text, keep the job in the (queue, tenant)'s line of waiters.
--
-- KEYS: one block of QUEUE_KEYS keys: the queue (see _lib.lua: read for the cap only), then
--       the tenant's four slot keys (_lib_slots.lua): [QUEUE_KEYS + 1] slots zset,
--       [QUEUE_KEYS + 2] slotinfo hash, [QUEUE_KEYS + 3] waiting zset, [QUEUE_KEYS + 4]
--       waiters hash.
-- ARGV: [1] now (see `now_of`), [2] tenant, [3] the new slot's nonce, [4] holder, [5] lease
--       (seconds), [6] limit ('': the tenant's max_running, else the queue's, else no cap),
--       [7] the waiter this run is a copy of ('': none), [8] park text ('': do not park),
--       [9] a new waiter's place, [10] PARK_TTL in ms.
-- Touches: meta, tids, tenants (read); the four slot keys.
-- Returns: {deadline, '', '', ''} when the slot is taken; {'', free_at, place, ''} when
--       refused (place: '' when not parked), free_at the earliest deadline among the slots
--       held; {'', '', '', '1'} when the waiter given is no longer parked (a copy that must
--       not run). Sent again: the first sending's reply.
--
-- The expired slots go first; then the count of those left decides (policy/slots.py: free).

register_once('acquire_slot', function()
  local now = now_of(ARGV[1])
  local held, info = KEYS[QUEUE_KEYS + 1], KEYS[QUEUE_KEYS + 2]
  local waiting, waiters = KEYS[QUEUE_KEYS + 3], KEYS[QUEUE_KEYS + 4]
  local waiter = ARGV[7]
  if waiter ~= '' and redis.call('HEXISTS', waiters, waiter) == 0 then
    return {'', '', '', '1'}
  end
  slots_drop_expired(held, info, now)
  local cap = opt(ARGV[6])
  if cap == nil then cap = slots_cap(open_queue(1, ''), ARGV[2]) end
  if cap ~= nil and redis.call('ZCARD', held) >= cap then
    local first = redis.call('ZRANGE', held, '0', '0', 'WITHSCORES')
    local place = ''
    if ARGV[8] ~= '' then
      place = waiter ~= '' and waiter or ARGV[9]
      waiter_park(waiting, waiters, place, ARGV[8], now, ARGV[10])
    end
    return {'', first[2], place, ''}
  end
  local deadline = now + tonumber(ARGV[5])
  redis.call('ZADD', held, fmt(deadline), ARGV[3])
  redis.call('HSET', info, ARGV[3], ARGV[5] .. ':' .. ARGV[4])
  slots_expire(held, info, now)
  if waiter ~= '' then
    redis.call('ZREM', waiting, waiter)
    redis.call('HDEL', waiters, waiter)
  end
  return {fmt(deadline), '', '', ''}
end)
