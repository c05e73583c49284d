-- heartbeat.lua: extend held leases to now + lease_timeout, charging the time run so far.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the tokens (see _lib.lua).
-- ARGV: [1] now (see `now_of`), then 3 values per token: block, job_id, lease number text.
-- Touches: meta (read), tenants, tnames (read), eligible, ready (read), jobs, running, wake.
-- Returns: one string per token, in order: the new deadline, after a 'c' when the job has
--       a cancel request (fairq/cancel.py), or '' when the lease is lost (expired or unknown;
--       nothing is changed for it). Sent again: see `register_once` below.
--
-- Charging as they run (fairness.charge_progress, `extend` in _lib_jobs.lua): when a job has
-- run longer than it was charged, the difference / w moves its tenant's F (and usage), and
-- an eligible tenant is retagged; a paused tenant (w = 0) is not charged.

local function beat()
  local now = now_of(ARGV[1])
  return each_held(now, 2, function(q, j)
    extend(q, j, now)
    if j.cancel_at ~= nil then return 'c' .. fmt(j.deadline) end
    return fmt(j.deadline)
  end)
end

-- Sent again after its reply was lost (register_once): each lease still held is extended
-- again, from the re-sending's time; one no longer held (ended since) keeps its first answer.
register_once('heartbeat', function()
  return beat()
end, function(stored)
  local again = beat()
  for i = 1, #again do
    if again[i] == '' then again[i] = stored[i] end
  end
  return again
end)
