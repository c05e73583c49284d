-- ack_many.lua: several running jobs succeeded; each token in order, as if acked one by one.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the tokens (see _lib.lua).
-- ARGV: [1] now (see `now_of`), [2] n, the results to keep, then 3 values per result: job_id,
--       the value (JSON text), seconds to keep it; then 3 values per token: block, job_id,
--       lease number text.
-- Touches: meta (read), tenants, eligible, ready (read), running, done, jobs, costs, wake;
--       results and expiring for the jobs with a result.
-- Returns: one string per token, in order: 'ok', or '' when the lease is lost (expired or
--       unknown, or acked earlier in this batch; nothing is changed for it).

-- The acks whose results count starts at ARGV[first]: each held job succeeds, keeping its
-- result when it has one (fairq/results.py).
local function succeed_each(now, first)
  local n = tonumber(ARGV[first])
  local kept = nil
  if n > 0 then
    kept = {}
    for a = first + 1, first + 3 * n, 3 do kept[ARGV[a]] = a end
  end
  return each_held(now, first + 1 + 3 * n, function(q, j)
    local a = kept and kept[j.id]
    if a then succeed(q, j, now, ARGV[a + 1], tonumber(ARGV[a + 2])) else succeed(q, j, now) end
    return 'ok'
  end)
end

register_once('ack_many', function()
  return succeed_each(now_of(ARGV[1]), 2)
end)
