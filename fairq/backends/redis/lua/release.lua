-- release.lua: a worker hands a running job back unfinished; the attempt is not counted.
--
-- KEYS: one block of QUEUE_KEYS keys: the job's queue (see _lib.lua).
-- ARGV: [1] job_id, [2] lease number (the token's text after its last ':'), [3] now.
-- Touches: meta (read), tenants, eligible, ready, readyat, running, jobs, backlog, wake.
-- Returns: {'ok'}; {'nf'}; {'exp', deadline}. Nothing is changed unless 'ok'.

register_once('release', function()
  local now = tonumber(ARGV[3])
  local q, j, lost = one_held(now)
  if lost then return lost end

  local t = tenant(q, j.tid)
  end_run(q, t, j, now, now)
  j.attempts = j.attempts - 1
  make_ready(q, t, j, now, now)
  retag(q, t)
  save_job(q, j)
  flush(q)
  return {'ok'}
end)
