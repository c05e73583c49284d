-- release_slots.lua: give held slots back.
--
-- KEYS: the slot keys of each distinct (queue, tenant) of the tokens, all of one queue, as
--       pairs: slots zset, slotinfo hash (_lib_slots.lua).
-- ARGV: [1] now (see `now_of`), then 2 values per token: its pair's number p (keys
--       2p - 1 and 2p), its nonce.
-- Touches: the slot keys (deleted when no slot is left).
-- Returns: one string per token, in order: '1' when its slot was held and is free now, ''
--       when it was not (expired, released before, unknown). Sent again: the first reply.

register_once('release_slots', function()
  local now = now_of(ARGV[1])
  local out, touched = {}, {}
  for a = 2, #ARGV, 2 do
    local p = tonumber(ARGV[a])
    local held, info, nonce = KEYS[2 * p - 1], KEYS[2 * p], ARGV[a + 1]
    if slot_held(held, info, nonce, now) == nil then
      out[#out + 1] = ''
    else
      redis.call('ZREM', held, nonce)
      redis.call('HDEL', info, nonce)
      out[#out + 1] = '1'
    end
    touched[p] = true
  end
  for p in pairs(touched) do slots_expire(KEYS[2 * p - 1], KEYS[2 * p], now) end
  return out
end)
