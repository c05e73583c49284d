-- checkpoint.lua: store a running job's progress and extend its lease, as heartbeat.lua does
-- for one lease (charging the time run so far).
--
-- KEYS: one block of QUEUE_KEYS keys: the job's queue (see _lib.lua).
-- ARGV: [1] job_id, [2] lease number (the token's text after its last ':'), [3] now (see
--       `now_of`), [4] the progress (JSON text, kept as given).
-- Touches: meta (read), tenants, eligible, ready (read), jobs, running, progress.
-- Returns: {'ok', deadline}; {'nf'}; {'exp', deadline}. Nothing is changed unless 'ok'.

register_once('checkpoint', function()
  local now = now_of(ARGV[3])
  local q, j, lost = one_held(now)
  if lost then return lost end
  extend(q, j, now)
  redis.call('HSET', q.k.progress, j.id, ARGV[4])
  flush(q)
  return {'ok', fmt(j.deadline)}
end)
