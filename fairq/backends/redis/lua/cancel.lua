-- cancel.lua: cancel jobs (fairq/cancel.py), one after another in the order given. A
-- scheduled or ready job is cancelled at once: it leaves scheduled, or ready and readyat (its
-- tenant's head is looked up again and its eligibility refreshed, as after a dispatch: a
-- tenant whose last ready job goes leaves eligible); a running job gets cancel_at, which its
-- heartbeat reports; a finished one is left as it is.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the jobs (see _lib.lua).
-- ARGV: [1] now (see `now_of`), then 2 values per job, in the order asked: block, job_id.
-- Touches: meta (read), tenants, eligible, ready, readyat, scheduled, done, jobs, errors,
--       backlog, wake.
-- Returns: one string per job: 'cancelled', 'requested', 'finished', or 'unknown' (not in
--       its queue's jobs: the directory named a queue it has left).

register_once('cancel', function()
  local now = now_of(ARGV[1])
  local queues = {}
  local out = {}
  for a = 2, #ARGV, 2 do
    local b = tonumber(ARGV[a])
    local q = queues[b]
    if q == nil then q = open_queue(b, ''); queues[b] = q end
    local j = load_job(q, ARGV[a + 1])
    local answer = 'finished'
    if j == nil then
      answer = 'unknown'
    elseif j.state == 'R' then
      if j.cancel_at == nil then
        j.cancel_at = now
        save_job(q, j)
      end
      answer = 'requested'
    elseif j.state == 's' or j.state == 'r' then
      local t = tenant(q, j.tid)
      if j.state == 'r' then
        redis.call('ZREM', q.k.ready, ready_member(j))
        redis.call('ZREM', q.k.readyat, readyat_member(j))
        t.ready = t.ready - 1
        if t.ready == 0 then redis.call('SREM', q.k.backlog, t.tidp) end
        t.hseq = nil  -- the head may have been this job: `index` looks it up again
        refresh(q, t, now, false)
      else
        redis.call('ZREM', q.k.scheduled, seq_member(j))
        t.scheduled = t.scheduled - 1
      end
      redis.call('HSET', q.k.errors, j.id, 'cancelled on request')
      end_cancelled(q, t, j, now)
      save_job(q, j)
      answer = 'cancelled'
    end
    out[#out + 1] = answer
  end
  for _, q in pairs(queues) do flush(q) end
  return out
end)
