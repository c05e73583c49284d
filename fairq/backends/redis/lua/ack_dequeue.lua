-- ack_dequeue.lua: ack_many.lua then dequeue.lua in one call: a busy worker stores its
-- finished jobs and fills the slots they free in one round trip.
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue, of the dequeue and of the tokens.
-- ARGV: [1] now of the dequeue, [2] limit, [3] worker id (not stored), [4] hold ('' for
--       none: dequeue.lua), [5] n, [6 .. 5 + n] the order in which to try the queues (block
--       numbers), [6 + n] now of the acks, then the acks' results and tokens as
--       ack_many.lua's ARGV from [2]. Both nows: `now_of`.
-- Touches: what ack_many.lua and dequeue.lua touch.
-- Returns: {answers, expired, block, id, ...}: ack_many's answers (one string per token),
--       then dequeue's reply. Sent again after its reply was lost: the first sending's
--       answers, and its leases as dequeue.lua's `take_again` gives them. The dispatch
--       charges what the acks just learned (`learned` in _lib.lua).

register_once('ack_dequeue', function()
  local last = 5 + tonumber(ARGV[5])
  local answers = succeed_each(now_of(ARGV[last + 1]), last + 2)
  local out = take(now_of(ARGV[1]), tonumber(ARGV[2]), opt(ARGV[4]), 6, last)
  table.insert(out, 1, answers)
  return out
end, function(reply)
  local out = take_again(reply, 2, now_of(ARGV[1]), opt(ARGV[4]))
  table.insert(out, 1, reply[1])
  return out
end)
