-- dequeue.lua: maintain the queues asked, then hand out up to `limit` jobs fairly.
--
-- Maintenance per queue, in order: promote, expire, un-limit (as maintain.lua).
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue (see _lib.lua).
-- ARGV: [1] now (see `now_of`; '>' .. now for one pipelined behind a BLPOP), [2] limit,
--       [3] worker id (not stored), [4] hold: seconds the relay holds each job unclaimed
--       (`dispatch`; '' for none: a worker's run starts now), [5 ..] the order in which to
--       try the queues, as block numbers (each named once).
-- Touches: every key of the blocks except bodies/tnames/costs (read), tids and done.
-- Returns: {expired, dues, block, id, record, body, tenant, block, id, ...}: the leases its
--       maintenance expired (EXPIRED_FIELDS values each: see `expire`), each queue's `due`
--       after the call (in the order asked; '' when unknown: nothing pending before it, for
--       a caller that splits its dequeues by slot: consuming.py), then the jobs, each what
--       one single dequeue at `now` would give, in order.
--       Sent again after its reply was lost (register_once), it answers the first sending's
--       reply with every lease still held extended to now + lease_timeout, or to now + hold
--       when unclaimed (as a heartbeat), and those no longer held left out: a job is never
--       handed out with less than its lease left, however long the re-sending took.

-- Maintain the queues of blocks ARGV[first .. last] (the order to try them in), then take
-- up to `limit` jobs, unclaimed under `hold` when given (`dispatch`): {expired, dues, block,
-- id, record, body, tenant, block, id, ...}.
local function take(now, limit, hold, first, last)
  local order = {}
  for i = first, last do order[#order + 1] = tonumber(ARGV[i]) end

  local queues = {}
  local expired = {}
  for _, b in ipairs(order) do
    local q = open_queue(b, '')
    queues[b] = q
    maintain_queue(q, now, expired)
  end

  local out = {expired}
  local taken = 0
  while taken < limit do
    local got, from = nil, nil
    for _, b in ipairs(order) do
      got = dispatch(queues[b], now, hold)
      if got then from = b; break end
    end
    if got == nil then break end
    out[#out + 1] = from
    for _, v in ipairs(got) do out[#out + 1] = v end
    taken = taken + 1
  end

  local dues = {}
  for i, b in ipairs(order) do
    flush(queues[b])
    dues[i] = optfmt(queues[b].due)
  end
  table.insert(out, 2, dues)
  return out
end

-- A stored reply of `take` (from reply[first] on), sent again: its leases started when the
-- first sending ran. Each still held is extended as a heartbeat at `now` would, held for
-- `hold` if unclaimed (its record in the answer is the extended one); one no longer held
-- (acked, failed, expired) is left out. The expired leases and the dues are reported as the
-- first sending found them (the dues are a hint: consuming.py).
local function take_again(reply, first, now, hold)
  local out = {reply[first], reply[first + 1]}
  local queues = {}
  for a = first + 2, #reply, 5 do
    local b, id = reply[a], reply[a + 1]
    local q = queues[b]
    if q == nil then q = open_queue(b, ''); queues[b] = q end
    local j, problem = held(q, id, int(job_from(id, reply[a + 2]).leases), now)
    if not problem then
      local n = #out
      out[n + 1], out[n + 2], out[n + 3] = b, id, extend(q, j, now, hold)
      out[n + 4], out[n + 5] = reply[a + 3], reply[a + 4]
    end
  end
  for _, q in pairs(queues) do flush(q) end
  return out
end

register_once('dequeue', function()
  return take(now_of(ARGV[1]), tonumber(ARGV[2]), opt(ARGV[4]), 5, #ARGV)
end, function(reply)
  return take_again(reply, 1, now_of(ARGV[1]), opt(ARGV[4]))
end)
