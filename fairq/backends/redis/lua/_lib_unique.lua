-- _lib_unique.lua: unique keys at enqueue (fairq/policy/unique.py, docs/unique.md), the last
-- shared part of the library (after _lib_slots.lua, before the operations' files). It only
-- defines local functions; enqueue.lua calls them.
--
-- A key is one string per (queue as enqueued, tenant, key), in that queue's Cluster slot
-- (keys.py: Layout.unique_key; a shard's keys share its queue's hash tag), that the caller
-- passes in KEYS:
--   uniq      string   expires_at .. ' ' .. hold (1: held for the whole window, 0: while its
--                      job is pending) .. ' ' .. the job's queue .. ' ' .. the job's id;
--                      expiring with its window (PEXPIRE), so Redis deletes a key once it can
--                      hold nothing: no pruning, and nothing grows
-- The window's end is kept in the value as well, and decides: a virtual clock (clock=caller)
-- is not Redis's, whose expiry only collects the garbage.
--
-- The unique section of an enqueue's ARGV, from `at`: U, then 3 values per unique job, in
-- batch order: its index in the batch (0-based), window (seconds), hold ('1' or '0'); its key
-- is KEYS[kbase + u] for the u-th (1-based) of them.

local function unique_read(key)
  local value = redis.call('GET', key)
  if not value then return nil end
  local expires, hold, queue, id = string.match(value, '^(%S+) (%d) (%S+) (.*)$')
  return tonumber(expires), hold == '1', queue, id
end

-- Whether job `id` of the queue named `queue` is pending (scheduled, ready or running: the
-- state byte after the record's 2-byte mask, _lib_jobs.lua). `blocks` maps the call's queue
-- names to their blocks; a job in a queue the call does not name (a queue resharded since)
-- cannot be read, and counts as gone.
local function unique_pending(blocks, queue, id)
  local b = blocks[queue]
  if b == nil then return false end
  local raw = redis.call('HGET', keys_of((b - 1) * QUEUE_KEYS).jobs, id)
  if not raw then return false end
  local state = string.sub(raw, 3, 3)
  return state == 's' or state == 'r' or state == 'R'
end

-- The batch's jobs whose key is held (policy/unique.py `holders`), in batch order, as
-- {[index] = {id = ..., queue = ...}} (held by a stored job) or {[index] = {index = i}}
-- (held by the earlier job i of the batch, which takes the key). Nothing is written.
local function unique_held(at, kbase, blocks, now)
  local held, taken = {}, {}
  for u = 1, tonumber(ARGV[at]) do
    local i, key = tonumber(ARGV[at + 3 * u - 2]), KEYS[kbase + u]
    if taken[key] ~= nil then
      held[i] = {index = taken[key]}
    else
      local expires, hold, queue, id = unique_read(key)
      if expires ~= nil and now < expires and (hold or unique_pending(blocks, queue, id)) then
        held[i] = {id = id, queue = queue}
      else
        taken[key] = i
      end
    end
  end
  return held
end

-- The indexes 0 .. njobs - 1 of the jobs to store: those whose key is not held.
local function unique_kept(njobs, held)
  local kept = {}
  for i = 0, njobs - 1 do
    if held[i] == nil then kept[#kept + 1] = i end
  end
  return kept
end

-- The stored unique jobs take their keys: `id_of(i)` and `queue_of(i)` are job i's id and
-- the name of the queue it went to.
local function unique_take(at, kbase, held, now, id_of, queue_of)
  for u = 1, tonumber(ARGV[at]) do
    local a = at + 3 * u - 2
    local i = tonumber(ARGV[a])
    if held[i] == nil then
      local window = tonumber(ARGV[a + 1])
      local value = fmt(now + window) .. ' ' .. ARGV[a + 2] .. ' ' .. queue_of(i) .. ' ' .. id_of(i)
      local ms = string.format('%d', math.max(1, math.ceil(window * 1000)))
      redis.call('SET', KEYS[kbase + u], value, 'PX', ms)
    end
  end
end

-- What an enqueue answers for its held jobs: index, id and queue name of the job holding
-- each key, flattened, appended to `reply`.
local function unique_answer(reply, held, id_of, queue_of)
  for i, h in pairs(held) do
    local n = #reply
    if h.index ~= nil then
      reply[n + 1], reply[n + 2], reply[n + 3] = i, id_of(h.index), queue_of(h.index)
    else
      reply[n + 1], reply[n + 2], reply[n + 3] = i, h.id, h.queue
    end
  end
  return reply
end

-- -- end of _lib_unique.lua (the operations' files follow) ------------------------------------
