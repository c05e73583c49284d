-- enqueue.lua: store a batch of new jobs, all or none.
--
-- KEYS: G keys shared by queues, then one block of QUEUE_KEYS keys per queue of the batch
--       (see _lib.lua). On a single Redis (G = 2): [1] directory hash (job_id -> queue), [2]
--       queues set. On a Redis Cluster (G = 0) the caller has claimed the ids in the
--       directory and registered the queues itself, before this call (directory.py): a
--       script there touches one slot only.
--       Jobs arrive here already routed: throttle rules were applied by route.lua first.
-- ARGV: [1] G, [2] now (see `now_of`), [3] seq floor F, [4] number of queue blocks B,
--       [5 .. 4+B] queue names (block order), then [5+B] number of jobs N and 11 values per
--       job, in enqueue order: block, job_id, body, tenant, priority, run_at, max_attempts,
--       lease_timeout, cost, i (the job's place in the caller's batch, from 0: on a Cluster
--       a batch is split into one call per slot), learn_cost ('0': charged its cost always).
--       A sharded job's block is its shards' blocks, space-separated, best first: it goes to
--       the least loaded (`least_loaded`); its shards share one hash tag (keys.py).
--       Then the unique section (_lib_unique.lua): U, 3 values per job with a unique key (its
--       index counts the jobs of this call, from 0); their keys follow the queue blocks in
--       KEYS (a unique key is its queue's: in its slot).
-- Touches: the directory and the queues set (single Redis); per queue: meta (its seq
--       counter too), tenants, tids, tnames, eligible, ready, readyat, scheduled, jobs,
--       bodies, backlog, wake; the unique keys given.
-- Returns: {} when stored; {'ok', block, ..., then index, id, queue, ...} when a job is
--       sharded or a unique key is held: the block of each job of the call (0: its key is
--       held, nothing stored for it), then each held job's index and the id and queue of the
--       job holding it; {'dup', id, ...} (nothing stored) when ids are already stored.
--
-- The enqueue order: the job at place i of the batch gets seq = max(its queue's last
-- seq + 1, F + i), so within a queue seqs grow in the order the queue stores its jobs, and
-- the caller's floor (a clock of its own that never goes back: plumbing.py) orders the jobs
-- of one caller across queues as it enqueued them, with no counter that queues share.

-- Enter every job id in the directory (HSETNX: one command per job, where a check and a
-- write took two), or none: at the first id already stored the ids entered so far are taken
-- out again and the rest only checked. Returns the ids already stored, or nil. A job whose
-- unique key is held (`held`) is not stored, and its id is neither entered nor checked.
local function claim(directory, first, fields, njobs, held)
  local dups = nil
  for i = 0, njobs - 1 do
    local a = first + i * fields
    local id = ARGV[a + 1]
    if held[i] ~= nil then
      -- not stored
    elseif dups == nil then
      local queue = ARGV[4 + tonumber(string.match(ARGV[a], '^%d+'))]  -- a shard: set again
      if redis.call('HSETNX', directory, id, queue) == 0 then
        dups = {id}
        for k = 0, i - 1 do
          if held[k] == nil then redis.call('HDEL', directory, ARGV[first + k * fields + 1]) end
        end
      end
    elseif redis.call('HEXISTS', directory, id) == 1 then
      dups[#dups + 1] = id
    end
  end
  return dups
end

-- Without the directory (a Cluster, where the caller claimed the ids): the ids already
-- stored in a queue of their block, or nil. The claim keeps ids unique; this check keeps a
-- queue's records whole should a claim be lost (a failover that lost its write). A job whose
-- unique key is held (`held`) is not stored, and its id is not checked.
local function stored_here(first, fields, njobs, held)
  local dups = nil
  for i = 0, njobs - 1 do
    local a = first + i * fields
    if held[i] == nil then
      for b in string.gmatch(ARGV[a], '%d+') do
        if redis.call('HEXISTS', KEYS[(tonumber(b) - 1) * QUEUE_KEYS + 12], ARGV[a + 1]) == 1 then
          dups = dups or {}
          dups[#dups + 1] = ARGV[a + 1]
          break
        end
      end
    end
  end
  return dups
end

-- fairq.policy.shards.least_loaded: of a sharded job's shards (spec: their blocks, best first),
-- the one where (own ready + 1) * (other eligible tenants + 1) is least, then with the fewest
-- others, then the first; others count up to MAX_OTHERS (policy/shards.py). Each shard is
-- synced first, so the batch's jobs before it count.
local MAX_OTHERS = 100
local function least_loaded(queues, spec, name)
  local best, least_turns, least_others = nil, 0, 0
  for b in string.gmatch(spec, '%d+') do
    local q = queues[tonumber(b)]
    sync(q)
    local others, own = redis.call('ZCARD', q.k.eligible), 0
    local t = q.named[name]
    if t == nil then
      local tid = redis.call('HGET', q.k.tids, name)
      if tid then t = tenant(q, tonumber(tid)); t.name, q.named[name] = name, t end
    end
    if t ~= nil then
      own = t.ready
      if t.eseq ~= '' then others = others - 1 end  -- its own entry in the eligible index
    end
    if others > MAX_OTHERS then others = MAX_OTHERS end
    local turns = (own + 1) * (others + 1)
    if best == nil or turns < least_turns or (turns == least_turns and others < least_others) then
      best, least_turns, least_others = tonumber(b), turns, others
    end
  end
  return best
end

register_once('enqueue', function()
  local directory, queue_set = unpack(take_globals(ARGV[1]))
  local now = now_of(ARGV[2])
  local floor = tonumber(ARGV[3])
  local nblocks = tonumber(ARGV[4])
  local njobs = tonumber(ARGV[5 + nblocks])
  local FIELDS = 11
  local first = 6 + nblocks
  local ufirst, kbase, named = first + njobs * FIELDS, nblocks * QUEUE_KEYS, {}
  for b = 1, nblocks do named[ARGV[4 + b]] = b end
  local held = unique_held(ufirst, kbase, named, now)

  local dups
  if directory then dups = claim(directory, first, FIELDS, njobs, held)
  else dups = stored_here(first, FIELDS, njobs, held) end
  if dups then return {'dup', unpack(dups)} end

  local queues, used = {}, {}
  for b = 1, nblocks do queues[b] = open_queue(b, ARGV[4 + b]) end

  local chosen, sharded = {'ok'}, next(held) ~= nil
  for i in pairs(held) do chosen[i + 2] = 0 end
  for _, i in ipairs(unique_kept(njobs, held)) do
    local a = first + i * FIELDS
    local block = tonumber(ARGV[a])
    if block == nil then
      block, sharded = least_loaded(queues, ARGV[a], ARGV[a + 3]), true
      if directory then redis.call('HSET', directory, ARGV[a + 1], ARGV[4 + block]) end
    end
    chosen[i + 2] = block
    if not used[block] and queue_set then  -- a shard no job went to is not a queue seen
      used[block] = true
      redis.call('SADD', queue_set, ARGV[4 + block])
    end
    local q = queues[block]
    local t = tenant_named(q, ARGV[a + 3])
    local j = {
      id = ARGV[a + 1], seq = next_seq(q, floor + tonumber(ARGV[a + 9])), tid = t.tid, state = 's',
      priority = tonumber(ARGV[a + 4]), enqueued_at = now, run_at = tonumber(ARGV[a + 5]),
      ready_at = nil, max_attempts = tonumber(ARGV[a + 6]),
      lease_timeout = tonumber(ARGV[a + 7]), cost = tonumber(ARGV[a + 8]), attempts = 0,
      leases = 0, charged = 0.0,
    }
    if ARGV[a + 10] == '0' then j.fixed = true end
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
  local function id_of(i) return ARGV[first + i * FIELDS + 1] end
  local function queue_of(i) return ARGV[4 + chosen[i + 2]] end
  unique_take(ufirst, kbase, held, now, id_of, queue_of)
  if sharded then return unique_answer(chosen, held, id_of, queue_of) end
  return {}
end)
