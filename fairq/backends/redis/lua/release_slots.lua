-- release_slots.lua: give held slots back, and wake one parked job per slot freed.
--
-- KEYS: the four slot keys of each distinct (queue, tenant) of the tokens, all of one queue:
--       slots zset, slotinfo hash, waiting zset, waiters hash (_lib_slots.lua).
-- ARGV: [1] now (see `now_of`), then 2 values per token: its block's number p (keys
--       4p - 3 to 4p), its nonce.
-- Touches: the slot keys (deleted when no slot is left); the waiting zset.
-- Returns: one string per token, in order: '' when its slot was not held (expired, released
--       before, unknown), else '=' followed by the place and park text (place:text) of the
--       parked job it woke (nothing after '=' when none waited). Sent again: the first reply.

register_once('release_slots', function()
  local now = now_of(ARGV[1])
  local out, touched = {}, {}
  for a = 2, #ARGV, 2 do
    local p = tonumber(ARGV[a])
    local held, info, nonce = KEYS[4 * p - 3], KEYS[4 * p - 2], ARGV[a + 1]
    if slot_held(held, info, nonce, now) == nil then
      out[#out + 1] = ''
    else
      redis.call('ZREM', held, nonce)
      redis.call('HDEL', info, nonce)
      out[#out + 1] = '=' .. waiter_wake(KEYS[4 * p - 1], KEYS[4 * p])
    end
    touched[p] = true
  end
  for p in pairs(touched) do slots_expire(KEYS[4 * p - 3], KEYS[4 * p - 2], now) end
  return out
end)
