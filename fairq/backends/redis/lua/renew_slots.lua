-- renew_slots.lua: extend held slots to now + their lease.
--
-- KEYS: the four slot keys of each distinct (queue, tenant) of the tokens, all of one queue
--       (_lib_slots.lua; the first two are used).
-- ARGV: [1] now (see `now_of`), then 2 values per token: its block's number p (keys
--       4p - 3 to 4p), its nonce.
-- Touches: the slot keys.
-- Returns: one string per token, in order: the new deadline, or '' when the slot is not held
--       (expired, released or unknown; nothing is changed for it). Sent again: see below.

local function renew_held()
  local now = now_of(ARGV[1])
  local out, touched = {}, {}
  for a = 2, #ARGV, 2 do
    local p = tonumber(ARGV[a])
    local held, info, nonce = KEYS[4 * p - 3], KEYS[4 * p - 2], ARGV[a + 1]
    if slot_held(held, info, nonce, now) == nil then
      out[#out + 1] = ''
    else
      local lease = string.match(redis.call('HGET', info, nonce), '^[^:]*')
      local deadline = now + tonumber(lease)
      redis.call('ZADD', held, fmt(deadline), nonce)
      out[#out + 1] = fmt(deadline)
    end
    touched[p] = true
  end
  for p in pairs(touched) do slots_expire(KEYS[4 * p - 3], KEYS[4 * p - 2], now) end
  return out
end

-- Sent again after its reply was lost (register_once): each slot still held is renewed again,
-- from the re-sending's time; one no longer held keeps its first answer.
register_once('renew_slots', function()
  return renew_held()
end, function(stored)
  local again = renew_held()
  for i = 1, #again do
    if again[i] == '' then again[i] = stored[i] end
  end
  return again
end)
