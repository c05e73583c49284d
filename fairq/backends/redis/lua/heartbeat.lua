-- heartbeat.lua: extend held leases to now + lease_timeout.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the tokens (see _lib.lua).
-- ARGV: [1] now, then 3 values per token: block, job_id, attempt text.
-- Touches: jobs, running.
-- Returns: one string per token, in order: the new deadline, or '' when the lease is lost
--       (expired or unknown; nothing is changed for it).

local now = tonumber(ARGV[1])
local queues = {}
local out = {}
for a = 2, #ARGV, 3 do
  local b = tonumber(ARGV[a])
  local q = queues[b]
  if q == nil then q = open_queue(b, ''); queues[b] = q end
  local j, problem = held(q, ARGV[a + 1], ARGV[a + 2], now)
  if problem then
    out[#out + 1] = ''
  else
    j.deadline = now + j.lease_timeout
    redis.call('ZADD', q.k.running, fmt(j.deadline), seq_member(j))
    save_job(q, j)
    out[#out + 1] = fmt(j.deadline)
  end
end
return out
