-- ack.lua: a running job succeeded.
--
-- KEYS: one block of QUEUE_KEYS keys: the job's queue (see _lib.lua).
-- ARGV: [1] job_id, [2] lease number (the token's text after its last ':'), [3] now.
-- Touches: meta (read), tenants, eligible, ready (read), running, done, jobs, wake.
--       The run's real cost replaces what it was charged (estimate, heartbeats).
-- Returns: {'ok'}; {'nf'} when no job is held under the lease; {'exp', deadline} when the
--       lease expired. Nothing is changed unless 'ok'.

register_once('ack', function()
  local now = tonumber(ARGV[3])
  local q, j, lost = one_held(now)
  if lost then return lost end
  succeed(q, j, now)
  flush(q)
  return {'ok'}
end)
