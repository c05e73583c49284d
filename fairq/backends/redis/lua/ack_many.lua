-- ack_many.lua: several running jobs succeeded; each token in order, as if acked one by one.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue of the tokens (see _lib.lua).
-- ARGV: [1] now (see `now_of`), then 3 values per token: block, job_id, lease number text.
-- Touches: meta (read), tenants, eligible, ready (read), running, done, jobs, wake.
-- Returns: one string per token, in order: 'ok', or '' when the lease is lost (expired or
--       unknown, or acked earlier in this batch; nothing is changed for it).

local function succeed_each(now, first)
  return each_held(now, first, function(q, j)
    succeed(q, j, now)
    return 'ok'
  end)
end

register_once('ack_many', function()
  return succeed_each(now_of(ARGV[1]), 2)
end)
