-- ack_dequeue.lua: ack_many.lua then dequeue.lua in one call: a busy worker stores its
-- finished jobs and fills the slots they free in one round trip.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue, of the dequeue and of the tokens.
-- ARGV: [1] now of the dequeue, [2] limit, [3] worker id (not stored), [4] n, [5 .. 4 + n]
--       the order in which to try the queues (block numbers), [5 + n] now of the acks, then
--       3 values per token to ack: block, job_id, lease number text.
-- Touches: what ack_many.lua and dequeue.lua touch.
-- Returns: {answers, promoted, expired, block, id, ...}: ack_many's answers (one string per
--       token), then dequeue's reply.

register_once('ack_dequeue', function()
  local last = 4 + tonumber(ARGV[4])
  local answers = succeed_each(tonumber(ARGV[last + 1]), last + 2)
  local out = take(tonumber(ARGV[1]), tonumber(ARGV[2]), 5, last)
  table.insert(out, 1, answers)
  return out
end)
