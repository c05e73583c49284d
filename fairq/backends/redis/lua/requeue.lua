-- requeue.lua: dead jobs become ready again with fresh attempts, keeping their seq.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the ids (see _lib.lua).
-- ARGV: [1] now (see `now_of`), then 2 values per id, in the order asked: block, job_id.
-- Touches: meta (read), tenants, eligible, ready, readyat, dead, jobs, backlog, wake.
-- Returns: how many of the jobs were dead (and are now ready).

register_once('requeue', function()
  local now = now_of(ARGV[1])
  local queues = {}
  local count = 0
  for a = 2, #ARGV, 2 do
    local b = tonumber(ARGV[a])
    local q = queues[b]
    if q == nil then q = open_queue(b, ''); queues[b] = q end
    local j = load_job(q, ARGV[a + 1])
    if j ~= nil and j.state == 'd' then
      local t = tenant(q, j.tid)
      redis.call('ZREM', q.k.dead, seq_member(j))
      t.dead = t.dead - 1
      j.attempts = 0
      j.finished_at = nil
      make_ready(q, t, j, now, now)
      save_job(q, j)
      count = count + 1
    end
  end
  for _, q in pairs(queues) do flush(q) end
  return count
end)
