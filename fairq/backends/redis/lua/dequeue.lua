-- dequeue.lua: maintain the queues asked, then hand out up to `limit` jobs fairly.
--
-- Maintenance per queue, in order: promote, expire, un-limit (as maintain.lua).
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue (see _lib.lua).
-- ARGV: [1] now (or '>' .. now: see `clock`), [2] limit, [3] worker id (not stored),
--       [4 ..] the order in which to try the queues, as block numbers (each named once).
-- Touches: every key of the blocks except bodies/tnames (read), tids and done.
-- Returns: {promoted, expired, block, id, record, body, tenant, block, id, ...}: each job
--       is what one single dequeue at `now` would give, in order. Counts are integers.

-- The time of a dequeue. '>N' marks one pipelined behind a BLPOP (waiting.py): it runs when
-- the wait ends, so N, its sender's clock when sent, is stale by then; the server's clock is
-- not, and taking the later of the two never moves time back.
local function clock(arg)
  if string.byte(arg, 1) ~= 62 then return tonumber(arg) end
  local t = redis.call('TIME')
  return max2(tonumber(string.sub(arg, 2)), tonumber(t[1]) + tonumber(t[2]) / 1000000)
end

-- Maintain the queues of blocks ARGV[first .. last] (the order to try them in), then take
-- up to `limit` jobs: {promoted, expired, block, id, record, body, tenant, block, id, ...}.
local function take(now, limit, first, last)
  local order = {}
  for i = first, last do order[#order + 1] = tonumber(ARGV[i]) end

  local queues = {}
  local promoted, expired = 0, 0
  for _, b in ipairs(order) do
    local q = open_queue(b, '')
    queues[b] = q
    local p, e = maintain_queue(q, now)
    promoted, expired = promoted + p, expired + e
  end

  local out = {promoted, expired}
  local taken = 0
  while taken < limit do
    local got, from = nil, nil
    for _, b in ipairs(order) do
      got = dispatch(queues[b], now)
      if got then from = b; break end
    end
    if got == nil then break end
    out[#out + 1] = from
    for _, v in ipairs(got) do out[#out + 1] = v end
    taken = taken + 1
  end

  for _, b in ipairs(order) do flush(queues[b]) end
  return out
end

register_once('dequeue', function()
  return take(clock(ARGV[1]), tonumber(ARGV[2]), 4, #ARGV)
end)
