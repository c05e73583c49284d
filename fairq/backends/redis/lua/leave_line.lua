-- leave_line.lua: take a parked job out of its (queue, tenant)'s line (LeaveLineParams: its
-- timed copy was not sent, and its peer gives the job back to its broker as it was).
--
-- KEYS: the tenant's four slot keys (_lib_slots.lua; the last two, its line, are used).
-- ARGV: [1] the job's place in line.
-- Touches: the waiting zset and the waiters hash.
-- Returns: 1 when the job was parked (now every copy carrying its place is gone), 0 when its
--       place was gone already (a copy took a slot). Sent again: the first sending's reply.

register_once('leave_line', function()
  redis.call('ZREM', KEYS[3], ARGV[1])
  return redis.call('HDEL', KEYS[4], ARGV[1])
end)
