-- heartbeat.lua: extend held leases, charging each claimed run the time run so far; or claim
-- relayed jobs (a peer's worker starts their runs), or hold them (the relay keeps them).
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the tokens (see _lib.lua).
-- ARGV: [1] now (see `now_of`), [2] '1' to claim (else ''), [3] hold: seconds ('' for none),
--       then 3 values per token: block, job_id, lease number text.
-- Touches: meta (read), tenants, tnames (read), eligible, ready (read), jobs, running, wake.
-- Returns: one string per token, in order: the new deadline, after a 'c' when the job has
--       a cancel request (fairq/cancel.py); 'k' when holding or claiming a lease already
--       claimed (left as it is); or '' when the lease is lost (expired or unknown; nothing is
--       changed for it). Sent again: see `register_once` below.
--
-- Charging as they run (fairness.charge_progress, `extend` in _lib_leases.lua): when a claimed
-- job has run longer than it was charged, the difference / w moves its tenant's F (and
-- usage), and an eligible tenant is retagged; a paused tenant (w = 0) is not charged. An
-- unclaimed job (DequeueParams.hold: waiting in a peer's broker) is charged nothing: a claim
-- starts its run (started_at = now, its own lease from now, still charged its estimate), a
-- hold keeps it until now + hold, and a plain heartbeat extends it by its lease.

local function beat()
  local now, claim, hold = now_of(ARGV[1]), ARGV[2] == '1', opt(ARGV[3])
  return each_held(now, 4, function(q, j)
    if (hold ~= nil or claim) and not j.unclaimed then return 'k' end
    if claim then j.unclaimed, j.started_at = nil, now end
    extend(q, j, now, hold)
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
    -- a claim that took its lease the first time finds it claimed now: still its own
    if again[i] == '' or (again[i] == 'k' and stored[i] ~= 'k') then again[i] = stored[i] end
  end
  return again
end)
