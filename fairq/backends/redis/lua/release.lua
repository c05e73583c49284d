-- release.lua: a worker hands a running job back unfinished; the attempt is not counted.
-- Ready again at once, or scheduled until run_at when that is later than now (a worker that
-- cannot run it: it waits for one that can); a note is kept as the job's last error.
--
-- KEYS: one block of QUEUE_KEYS keys: the job's queue (see _lib.lua).
-- ARGV: [1] job_id, [2] lease number (the token's text after its last ':'), [3] now (see
--       `now_of`), [4] run_at ('' for at once), [5] note (absent: none).
-- Touches: meta (read), tenants, eligible, ready, readyat, scheduled, running, jobs,
--       errors, backlog, wake.
-- Returns: {'ok'}; {'nf'}; {'exp', deadline}. Nothing is changed unless 'ok'.
-- A job with a cancel request (fairq/cancel.py) is not handed back: it ends cancelled, its
-- run counted as a cancelled one.

register_once('release', function()
  local now = now_of(ARGV[3])
  local q, j, lost = one_held(now)
  if lost then return lost end

  local t = tenant(q, j.tid)
  end_run(q, t, j, now, now)
  j.attempts = j.attempts - 1
  if ARGV[5] ~= nil then redis.call('HSET', q.k.errors, j.id, ARGV[5]) end
  local run_at = opt(ARGV[4])
  if j.cancel_at ~= nil then
    if ARGV[5] == nil then redis.call('HSET', q.k.errors, j.id, 'cancelled on request') end
    figure(q, t, 'r', bucket_of(now - j.started_at))
    figure(q, t, 'o', OUT_CANCELLED)
    end_cancelled(q, t, j, now)
  elseif run_at == nil or run_at <= now then
    make_ready(q, t, j, now, now)
  else
    schedule(q, t, j, run_at)
  end
  retag(q, t)
  save_job(q, j)
  flush(q)
  return {'ok'}
end)
