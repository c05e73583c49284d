-- fail.lua: a running job's attempt failed: ready again, scheduled for retry, or dead.
--
-- KEYS: one block of QUEUE_KEYS keys: the job's queue (see _lib.lua).
-- ARGV: [1] job_id, [2] lease number (the token's text after its last ':'), [3] now (see
--       `now_of`), [4] error, [5] retry_at ('' for no retry).
-- Touches: meta (read), tenants, tnames (read), eligible, ready, readyat, scheduled, running,
--       dead, jobs, bodies (read), errors, backlog, wake, progress (read), costs.
-- Returns: {'ok', record, body, tenant, error, progress ('' for none)} (the job after the
--       call); {'nf'};
--       {'exp', deadline}. Nothing is changed unless 'ok'.

register_once('fail', function()
  local now = now_of(ARGV[3])
  local q, j, lost = one_held(now)
  if lost then return lost end

  local t = tenant(q, j.tid)
  local record = fail_job(q, t, j, now, now, ARGV[4], opt(ARGV[5]))
  flush(q)
  local name = name_of(q, t)
  local progress = redis.call('HGET', q.k.progress, j.id) or ''
  return {'ok', record, redis.call('HGET', q.k.bodies, j.id), name, ARGV[4], progress}
end)
