-- heartbeat.lua: extend held leases to now + lease_timeout, charging the time run so far.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the tokens (see _lib.lua).
-- ARGV: [1] now (see `now_of`), then 3 values per token: block, job_id, lease number text.
-- Touches: meta (read), tenants, tnames (read), eligible, ready (read), jobs, running, wake.
-- Returns: one string per token, in order: the new deadline, or '' when the lease is lost
--       (expired or unknown; nothing is changed for it).
--
-- Charging as they run (fairness.charge_progress, `extend` in _lib_jobs.lua): when a job has
-- run longer than it was charged, the difference / w moves its tenant's F (and usage), and
-- an eligible tenant is retagged; a paused tenant (w = 0) is not charged.

register_once('heartbeat', function()
  local now = now_of(ARGV[1])
  return each_held(now, 2, function(q, j)
    extend(q, j, now)
    return fmt(j.deadline)
  end)
end)
