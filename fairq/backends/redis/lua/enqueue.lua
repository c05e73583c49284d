-- enqueue.lua: store a batch of new jobs, all or none.
--
-- KEYS: [1] directory hash (job_id -> queue), [2] seq counter, [3] queues set,
--       then one block of QUEUE_KEYS keys per queue of the batch (see _lib.lua).
--       Jobs arrive here already routed: throttle rules were applied by route.lua first.
-- ARGV: [1] now (see `now_of`), [2] number of queue blocks B, [3 .. 2+B] queue names (block order),
--       then [3+B] number of jobs N and 9 values per job, in enqueue order:
--       block, job_id, body, tenant, priority, run_at, max_attempts, lease_timeout, cost.
-- Touches: the directory, the seq counter, the queues set; per queue: meta, tenants, tids,
--       tnames, eligible, ready, readyat, scheduled, jobs, bodies, backlog, wake.
-- Returns: {} when stored; {'dup', id, ...} (nothing stored) when ids are already stored.

-- Enter every job id in the directory (HSETNX: one command per job, where a check and a
-- write took two), or none: at the first id already stored the ids entered so far are taken
-- out again and the rest only checked. Returns the ids already stored, or nil.
local function claim(directory, first, fields, njobs)
  local dups = nil
  for i = 0, njobs - 1 do
    local a = first + i * fields
    local id = ARGV[a + 1]
    if dups == nil then
      if redis.call('HSETNX', directory, id, ARGV[2 + tonumber(ARGV[a])]) == 0 then
        dups = {id}
        for k = 0, i - 1 do redis.call('HDEL', directory, ARGV[first + k * fields + 1]) end
      end
    elseif redis.call('HEXISTS', directory, id) == 1 then
      dups[#dups + 1] = id
    end
  end
  return dups
end

register_once('enqueue', function()
  local now = now_of(ARGV[1])
  local nblocks = tonumber(ARGV[2])
  local njobs = tonumber(ARGV[3 + nblocks])
  local FIELDS = 9
  local first = 4 + nblocks
  local directory = table.remove(KEYS, 1)
  local counter = table.remove(KEYS, 1)
  local queue_set = table.remove(KEYS, 1)

  local dups = claim(directory, first, FIELDS, njobs)
  if dups then return {'dup', unpack(dups)} end

  local queues = {}
  for b = 1, nblocks do
    queues[b] = open_queue(b, ARGV[2 + b])
    redis.call('SADD', queue_set, ARGV[2 + b])
  end

  local seq = redis.call('INCRBY', counter, njobs) - njobs
  for i = 0, njobs - 1 do
    local a = first + i * FIELDS
    local q = queues[tonumber(ARGV[a])]
    local t = tenant_named(q, ARGV[a + 3])
    seq = seq + 1
    local j = {
      id = ARGV[a + 1], seq = seq, tid = t.tid, state = 's', priority = tonumber(ARGV[a + 4]),
      enqueued_at = now, run_at = tonumber(ARGV[a + 5]), ready_at = nil,
      max_attempts = tonumber(ARGV[a + 6]), lease_timeout = tonumber(ARGV[a + 7]),
      cost = tonumber(ARGV[a + 8]), attempts = 0, leases = 0, charged = 0.0,
    }
    redis.call('HSET', q.k.bodies, j.id, ARGV[a + 2])
    if j.run_at <= now then
      make_ready(q, t, j, now, now)
    else
      t.scheduled = t.scheduled + 1
      pend(q, q.k.scheduled, j.run_at, seq_member(j))
    end
    save_job(q, j)
  end

  for b = 1, nblocks do flush(queues[b]) end
  return {}
end)
