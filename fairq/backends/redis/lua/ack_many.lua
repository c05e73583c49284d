-- ack_many.lua: several running jobs succeeded; exactly single acks (ack.lua) in order.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the tokens (see _lib.lua).
-- ARGV: [1] now, then 3 values per token: block, job_id, lease number text.
-- Touches: meta (read), tenants, eligible, ready (read), running, done, jobs, wake.
-- Returns: one string per token, in order: 'ok', or '' when the lease is lost (expired or
--       unknown, or acked earlier in this batch; nothing is changed for it).
--
-- Tenants are read once per queue and written back once at the end (flush); a job is saved
-- as soon as it is acked, so a token named twice finds its job finished the second time.

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
    local t = tenant(q, j.tid)
    end_run(q, t, j, now, now)
    t.succeeded = t.succeeded + 1
    j.state = 'S'
    j.finished_at = now
    redis.call('ZADD', q.k.done, fmt(now), seq_member(j))
    retag(q, t)
    save_job(q, j)
    out[#out + 1] = 'ok'
  end
end
for _, q in pairs(queues) do flush(q) end
return out
