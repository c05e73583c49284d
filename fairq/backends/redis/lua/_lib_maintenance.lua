-- _lib_maintenance.lua: the time-driven events of a queue (promote, expire, un-limit) and
-- the prune of finished jobs (maintain.lua, dequeue.lua). Part of the one library scripts.py
-- loads (NEEDS there says which parts come before it); it only defines locals.

-- Scheduled jobs whose run_at <= now become ready, in (run_at, seq) order.
local function promote(q, now)
  local due = redis.call('ZRANGEBYSCORE', q.k.scheduled, '-inf', fmt(now))
  for _, m in ipairs(due) do
    local j = load_job(q, string.sub(m, SEQW + 1))
    local t = tenant(q, j.tid)
    redis.call('ZREM', q.k.scheduled, m)
    t.scheduled = t.scheduled - 1
    make_ready(q, t, j, now, j.run_at)
    save_job(q, j)
  end
  return #due
end

local EXPIRED_FIELDS = 8  -- per lease in `expired`: see `expire`

-- Leases with deadline <= now end, in (deadline, seq) order: a claimed run fails with "lease
-- expired", charged no more than it was so far (`end_run`); an unclaimed one is given back
-- (`unclaimed`). Appends to `expired` what each one was, EXPIRED_FIELDS values: block, job
-- id, job name, tenant name, attempt, deadline, 1 if dead (2: it ended cancelled, it had a
-- cancel request; else 0), 1 if it was claimed (else 0: its attempt is the one given back).
local function expire(q, now, expired)
  local due = redis.call('ZRANGEBYSCORE', q.k.running, '-inf', fmt(now))
  local n = #expired
  for _, m in ipairs(due) do
    local j = load_job(q, string.sub(m, RUNNING_ID))
    local t = tenant(q, j.tid)
    local deadline, name, claimed, attempt = fmt(j.deadline), name_of_job(q, j), 1, j.attempts
    if not j.unclaimed then
      fail_job(q, t, j, now, nil, 'lease expired', now)
    else
      unclaimed(q, t, j, now)
      claimed = 0
    end
    local dead = 0
    if j.state == 'd' then dead = 1 elseif j.state == 'c' then dead = 2 end
    expired[n + 1], expired[n + 2], expired[n + 3], expired[n + 4] = q.block, j.id, name,
      name_of(q, t)
    expired[n + 5], expired[n + 6], expired[n + 7], expired[n + 8] = attempt, deadline, dead,
      claimed
    n = n + EXPIRED_FIELDS
  end
end

-- Rate limits over (limited_until <= now) end, in (limited_until, tenant) order; refresh.
local function unlimit(q, now)
  local due = redis.call('ZRANGEBYSCORE', q.k.limited, '-inf', fmt(now))
  for _, name in ipairs(due) do
    local t = tenant(q, tonumber(redis.call('HGET', q.k.tids, name)))
    t.name = name
    set_limited(q, t, nil)
    refresh(q, t, now, false)
  end
end

-- The earliest pending run_at, deadline or limited_until of the queue, or nil.
local function next_due_of(q, due)
  for _, key in ipairs({q.k.scheduled, q.k.running, q.k.limited}) do
    local first = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')[2]
    if first and (due == nil or tonumber(first) < due) then due = tonumber(first) end
  end
  return due
end

-- Maintenance of one queue, in the order the rules fix: promote, expire (appending to
-- `expired`: see `expire`), un-limit. Before `due` nothing can be due (every pending score
-- is at or above it), so nothing is read; after maintaining, `due` is the earliest pending
-- time again (inf: nothing pending). Returns how many were promoted.
local function maintain_queue(q, now, expired)
  if q.due ~= nil and now < q.due then return 0 end
  local promoted = promote(q, now)
  expire(q, now, expired)
  unlimit(q, now)
  q.due, q.duedirty = next_due_of(q, nil) or math.huge, true
  return promoted
end

-- Delete the succeeded and cancelled jobs finished before `before` (done), and the
-- succeeded jobs whose kept result expired by `now` (expiring); a tenant whose last stored
-- job goes is forgotten. O(log n) per job pruned. Their ids leave the directory when it is
-- given (a single Redis), else are appended to `gone` for the caller to take out (a Cluster,
-- where the directory is in other slots: directory.py). Returns how many were pruned.
local function prune(q, directory, before, now, gone)
  local touched = {}
  local function drop(key, members)
    for _, m in ipairs(members) do
      local id = string.sub(m, SEQW + 1)
      local t = tenant(q, load_job(q, id).tid)
      t.kept = t.kept - 1
      touched[t.tid] = t
      redis.call('HDEL', q.k.jobs, id)
      redis.call('HDEL', q.k.bodies, id)
      redis.call('HDEL', q.k.errors, id)
      redis.call('HDEL', q.k.progress, id)
      redis.call('HDEL', q.k.results, id)
      if directory then redis.call('HDEL', directory, id) else gone[#gone + 1] = id end
      redis.call('ZREM', key, m)
    end
    return #members
  end
  local pruned = drop(q.k.done, redis.call('ZRANGEBYSCORE', q.k.done, '-inf', '(' .. fmt(before)))
  pruned = pruned + drop(q.k.expiring, redis.call('ZRANGEBYSCORE', q.k.expiring, '-inf', fmt(now)))
  for _, t in pairs(touched) do
    if forgettable(t, now) then forget(q, t) end
  end
  flush(q)
  return pruned
end

-- -- end of _lib_maintenance.lua ------------------------------------------------------------
