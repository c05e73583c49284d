-- _lib_jobs.lua: shared helpers for jobs, maintenance and dispatch; the second part of the
-- one library scripts.py loads (after _lib.lua, whose helpers it uses, before _lib_slots.lua
-- and the operations' files). It only defines local functions. The stored records are documented in _lib.lua.

-- -- figures (fairq/figures.py) ---------------------------------------------------------------

-- The histogram's bucket bounds, 0.001 * 2^k for k = 0 .. FIG_BUCKETS - 1 (FIG_BUCKETS from
-- policy/histogram.py, in the library's header): the very doubles Python computes.
local FIG_BOUNDS = {}
for k = 0, FIG_BUCKETS - 1 do FIG_BOUNDS[k + 1] = 0.001 * 2 ^ k end

-- histogram.bucket_of: how many bounds are below x (binary search).
local function bucket_of(x)
  local lo, hi = 1, FIG_BUCKETS + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if FIG_BOUNDS[mid] < x then lo = mid + 1 else hi = mid end
  end
  return lo - 1
end

-- Count one figure of tenant t in this call's tally (written by `flush`, one HINCRBY per
-- distinct field): kind 'w' / 'r' with a bucket, or 'o' with an outcome's index.
local function figure(q, t, kind, bucket)
  local f = t.tids .. ':' .. kind .. bucket
  local n = q.figs[f]
  if n == nil then n, q.nfigs = 0, q.nfigs + 1 end
  q.figs[f] = n + 1
end

-- Outcomes by their index in histogram.OUTCOMES; a succeeded run is counted by its run time
-- alone (fairq/figures.py).
local OUT_FAILED, OUT_EXPIRED, OUT_CANCELLED = 1, 2, 3

-- -- jobs -----------------------------------------------------------------------------------

-- The job record (JOB_FIXED/JOB_OPTIONAL/JOB_FLAGS in records.py): fixed state, seq, tid,
-- priority, max_attempts, attempts, leases, enqueued_at, run_at, lease_timeout, cost,
-- charged; optional ready_at, started_at, deadline, finished_at, cancel_at (a running job was
-- asked to stop: fairq/cancel.py), result_until (its kept result expires: fairq/results.py)
-- (read and written as tenant_from and tenant_record do). States: s scheduled, r ready,
-- R running, S succeeded, d dead, c cancelled. Two flags follow the optional fields' bits in
-- the mask, each set for the exception, so a record an older fairq wrote, without them,
-- reads as the common case: FIXED_COST, declared learn_cost=False (j.fixed), and UNCLAIMED, a
-- relayed job's run not started yet (j.unclaimed: `dispatch`); a job's table holds them as
-- true or nil, so a new job's (enqueue.lua) has no field more: two more made Lua regrow it,
-- which cost 5 % of an enqueue. A running job's
-- name follows the packed fields (j.name; a running job an older fairq handed out has none:
-- `name_of_job`), so ending its run learns its cost without reading its body.
local job_format = formats('>Hc1dI4i4dddddddd', {'d', 'd', 'd', 'd', 'd', 'd'})
local FIXED_COST, UNCLAIMED = 64, 128
local job_sizes = {}  -- mask -> the size of its packed fields

local function job_from(id, raw)
  local hi, mask = string.byte(raw, 1, 2)
  mask = hi * 256 + mask
  local _, state, seq, tid, priority, max_attempts, attempts, leases, enqueued_at, run_at,
    lease_timeout, cost, charged, a, b, c, d, e, f = struct.unpack(job_format(mask), raw)
  local ready_at, started_at, deadline, finished_at, cancel_at, result_until, name
  local opts = mask % 64
  if opts % 2 == 1 then ready_at, a, b, c, d, e = a, b, c, d, e, f end
  if opts % 4 >= 2 then started_at, a, b, c, d = a, b, c, d, e end
  if opts % 8 >= 4 then deadline, a, b, c = a, b, c, d end
  if opts % 16 >= 8 then finished_at, a, b = a, b, c end
  if opts % 32 >= 16 then cancel_at, a = a, b end
  if opts >= 32 then result_until = a end
  if state == 'R' then
    local size = job_sizes[mask]
    if size == nil then size = struct.size(job_format(mask)); job_sizes[mask] = size end
    if #raw > size then name = string.sub(raw, size + 1) end
  end
  return {
    id = id, state = state, seq = seq, tid = tid, priority = priority,
    max_attempts = max_attempts, attempts = attempts, leases = leases,
    enqueued_at = enqueued_at, run_at = run_at, lease_timeout = lease_timeout, cost = cost,
    charged = charged, ready_at = ready_at, started_at = started_at, deadline = deadline,
    finished_at = finished_at, cancel_at = cancel_at, result_until = result_until, seqp = nil,
    fixed = mask % 128 >= FIXED_COST or nil, unclaimed = mask >= UNCLAIMED or nil, name = name,
  }
end

local function job_record(j)
  local mask, a, b, c, d, e, f = 0, nil, nil, nil, nil, nil, nil
  if j.result_until ~= nil then mask, a = 32, j.result_until end
  if j.cancel_at ~= nil then mask, a, b = mask + 16, j.cancel_at, a end
  if j.finished_at ~= nil then mask, a, b, c = mask + 8, j.finished_at, a, b end
  if j.deadline ~= nil then mask, a, b, c, d = mask + 4, j.deadline, a, b, c end
  if j.started_at ~= nil then mask, a, b, c, d, e = mask + 2, j.started_at, a, b, c, d end
  if j.ready_at ~= nil then mask, a, b, c, d, e, f = mask + 1, j.ready_at, a, b, c, d, e end
  if j.fixed then mask = mask + FIXED_COST end
  if j.unclaimed then mask = mask + UNCLAIMED end
  local record = struct.pack(job_format(mask), mask, j.state, j.seq, j.tid, j.priority,
    j.max_attempts, j.attempts, j.leases, j.enqueued_at, j.run_at, j.lease_timeout, j.cost,
    j.charged, a, b, c, d, e, f)
  if j.state == 'R' and j.name ~= nil then return record .. j.name end
  return record
end

local function load_job(q, id)
  local raw = redis.call('HGET', q.k.jobs, id)
  if not raw then return nil end
  return job_from(id, raw)
end

local function save_job(q, j)
  local record = job_record(j)
  redis.call('HSET', q.k.jobs, j.id, record)
  return record
end

-- The job's seq as member text (formatted once per job and call).
local function seqp(j)
  if j.seqp == nil then j.seqp = pad(j.seq, SEQW) end
  return j.seqp
end

local function seq_member(j) return seqp(j) .. j.id end
local function running_member(j) return seqp(j) .. LONG .. j.id end
local RUNNING_ID = SEQW + #LONG + 1  -- where the job id starts in a running member

local function ready_member(j)
  return pad(j.tid, TIDW) .. pad(PRIO_TOP - j.priority, PRIOW) .. seqp(j) .. j.id
end

local function readyat_member(j)
  return pad(j.tid, TIDW) .. sortable(j.ready_at) .. seqp(j)
end

-- The job's name: its body is len(name) .. ':' .. name .. payload, after
-- 'h' .. len(headers) .. ':' .. headers when it has headers (records.py encode_body). Each
-- dispatch reads it: one match and one sub (C calls cost more than the rest here).
local function name_in(body)
  local size, at = string.match(body, '^(%d+):()')
  if size == nil then  -- headers first
    local hsize, hat = string.match(body, '^h(%d+):()')
    size, at = string.match(body, '^(%d+):()', hat + tonumber(hsize))
  end
  return string.sub(body, at, at + tonumber(size) - 1)
end

-- The name of a running job: kept in its record from its dispatch on (`job_record`), read
-- from its body for one an older fairq handed out.
local function name_of_job(q, j)
  if j.name == nil then j.name = name_in(redis.call('HGET', q.k.bodies, j.id)) end
  return j.name
end

-- -- learned costs (fairq/policy/cost.py) ------------------------------------------------------

local COST_FORMAT = '>Hd'  -- runs, mean: a costs field's value

-- The learned cost {runs, mean} of the queue's jobs named `name` ({0, 0.0}: none yet), read
-- once per call and name (`learned` in _lib.lua).
local function learned_of(q, name)
  local known = learned[q.k.costs]
  if known == nil then known = {}; learned[q.k.costs] = known end
  local c = known[name]
  if c == nil then
    local raw = redis.call('HGET', q.k.costs, name)
    if raw then
      local runs, mean = struct.unpack(COST_FORMAT, raw)
      c = {runs = runs, mean = mean}
    else
      c = {runs = 0, mean = 0.0}
    end
    known[name] = c
  end
  return c
end

-- cost.estimate: what a running job is charged at its dispatch: its declared cost while its
-- name has no sample or when it is declared learn_cost=False, else the learned mean.
local function estimate(q, j)
  if j.fixed then return j.cost end
  local c = learned_of(q, j.name)
  if c.runs == 0 then return j.cost end
  return c.mean
end

-- cost.learn: a claimed run that ended at ended_at (an ack, or a failure its worker reported)
-- is a sample of its name's learned cost, in the policy's expressions and order; `flush`
-- writes it back (one HSET per queue and call). An unclaimed run (a relayed job's wait in
-- the broker) teaches nothing.
local function learn(q, j, ended_at)
  if j.unclaimed then return end
  local name = name_of_job(q, j)
  local c = learned_of(q, name)
  local sample = max2(ended_at - j.started_at, MIN_CHARGE)
  if c.runs >= COST_TRUSTED then sample = min2(sample, COST_OUTLIER * c.mean) end
  c.runs = min2(c.runs + 1, COST_WINDOW)
  c.mean = c.mean + (sample - c.mean) / c.runs
  if q.newcosts == nil then q.newcosts = {} end
  q.newcosts[name] = c
end

-- Into its tenant's ready FIFO ("make ready") as of ready_at, then refresh.
local function make_ready(q, t, j, now, ready_at)
  local returning = t.ready == 0
  j.state = 'r'
  j.ready_at = ready_at
  t.ready = t.ready + 1
  if t.ready == 1 then redis.call('SADD', q.k.backlog, t.tidp) end
  redis.call('ZADD', q.k.ready, '0', ready_member(j))
  if returning then t.hseq = seqp(j) else t.hseq = nil end  -- the head may have changed
  redis.call('ZADD', q.k.readyat, '0', readyat_member(j))
  q.wake, t.woke = q.wake + 1, true  -- a token per job (so `index` adds none for it)
  refresh(q, t, now, returning)
end

-- The running job a lease names: job, or nil and 'nf' / 'exp' (nothing is changed).
local function held(q, id, lease_text, now)
  local j = load_job(q, id)
  if j == nil or j.state ~= 'R' or int(j.leases) ~= lease_text then return nil, 'nf' end
  if now >= j.deadline then return j, 'exp' end
  return j, nil
end

-- Charge the run's real cost in place of what it was charged so far; free its slot.
-- fairness.finish_after_run: a paused tenant (weight 0) is not re-charged. ended_at nil: the
-- run's end is unknown (its lease expired: the worker died or lost the store). A crash is not
-- consumption, so the run stays charged what it was so far (the estimate, raised by
-- heartbeats) and F, usage and usage_at are left as they are (policy/tenant.py end_run).
local function end_run(q, t, j, ended_at, now)
  if ended_at ~= nil then
    local charge = max2(ended_at - j.started_at, MIN_CHARGE)
    local w = weight_of(q, t)
    local finish = t.F
    if not (w <= 0) then finish = t.F + (charge - j.charged) / w end
    set_finish(q, t, finish, now)
  end
  t.running = t.running - 1
  redis.call('ZREM', q.k.running, running_member(j))
  j.deadline = nil
end

-- Schedule a job that is not running until run_at (> now): a retry, or a job handed back.
local function schedule(q, t, j, run_at)
  j.state = 's'
  j.run_at = run_at
  t.scheduled = t.scheduled + 1
  pend(q, q.k.scheduled, run_at, seq_member(j))
end

-- A job neither queued nor running any more ends cancelled, kept (as a succeeded job is)
-- until the retention prunes it (fairq/cancel.py). The caller saves the job.
local function end_cancelled(q, t, j, now)
  j.state = 'c'
  j.finished_at = now
  t.cancelled = t.cancelled + 1
  t.kept = t.kept + 1
  redis.call('ZADD', q.k.done, fmt(now), seq_member(j))
end

-- A failed attempt (or an expired lease): dead, ready again, or scheduled for retry_at; a
-- job with a cancel request (cancel_at) ends cancelled instead: a failure its worker reports
-- is then its stop (a cancelled run, not a failed attempt), an expired lease still a failure.
local function fail_job(q, t, j, now, ended_at, err, retry_at)
  if ended_at == nil then  -- its lease expired: how long it ran is unknown
    figure(q, t, 'o', OUT_EXPIRED)
  else
    figure(q, t, 'r', bucket_of(ended_at - j.started_at))
    local outcome = OUT_FAILED
    if j.cancel_at ~= nil then outcome = OUT_CANCELLED end
    figure(q, t, 'o', outcome)
    learn(q, j, ended_at)
  end
  end_run(q, t, j, ended_at, now)
  if j.cancel_at == nil or ended_at == nil then t.failed = t.failed + 1 end
  redis.call('HSET', q.k.errors, j.id, err)
  if j.cancel_at ~= nil then
    end_cancelled(q, t, j, now)
  elseif retry_at == nil or j.attempts >= j.max_attempts then
    j.state = 'd'
    j.finished_at = now
    t.dead = t.dead + 1
    redis.call('ZADD', q.k.dead, fmt(now), seq_member(j))
  elseif retry_at <= now then
    make_ready(q, t, j, now, now)
  else
    schedule(q, t, j, retry_at)
  end
  retag(q, t)
  return save_job(q, j)
end

-- A heartbeat: a claimed run is charged the time it has run beyond what it was charged
-- (fairness.charge_progress; a paused tenant, w = 0, is not charged), retagging an eligible
-- tenant whose F moved, and its lease extended to now + lease_timeout. An unclaimed one (a
-- relayed job waiting in a broker: no service yet) is charged nothing, and held until
-- now + hold (its relay's, when given) or now + lease_timeout.
local function extend(q, j, now, hold)
  local deadline = now + j.lease_timeout
  if not j.unclaimed then
    local t = tenant(q, j.tid)
    local w = weight_of(q, t)
    local elapsed = now - j.started_at
    if not (elapsed <= j.charged or w <= 0) then
      local finish = t.F + (elapsed - j.charged) / w
      j.charged = elapsed
      if finish ~= t.F then
        set_finish(q, t, finish, now)
        if t.S ~= nil then retag(q, t) end
      end
    end
  elseif hold ~= nil then
    deadline = now + hold
  end
  j.deadline = deadline
  pend(q, q.k.running, j.deadline, running_member(j))
  return save_job(q, j)
end

-- A relayed job's hold lapsed before a worker claimed it (its relay died, or gave it back):
-- its run never started, so the attempt is given back and nothing is counted; it stays
-- charged its estimate (a crash is not consumption: `end_run`). Ready again at once, or
-- cancelled if it was asked to stop.
local function unclaimed(q, t, j, now)
  end_run(q, t, j, nil, now)
  j.attempts = j.attempts - 1
  if j.cancel_at ~= nil then
    redis.call('HSET', q.k.errors, j.id, 'cancelled on request')
    end_cancelled(q, t, j, now)
  else
    make_ready(q, t, j, now, now)
  end
  retag(q, t)
  return save_job(q, j)
end

-- -- maintenance ----------------------------------------------------------------------------

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

-- -- dispatch -------------------------------------------------------------------------------

-- The queue's next job by (S, head_seq): it runs under a lease, charged its estimate
-- (`estimate`). With a hold (the relay's dequeue) it is handed out unclaimed, held until
-- now + hold: its run starts when a worker claims it (heartbeat.lua). Returns the reply
-- entry, or nil when no tenant is eligible or the queue is full (its leased jobs at
-- max_in_flight: one ZCARD, for capped queues only).
local function dispatch(q, now, hold)
  if is_full(q) then return nil end
  sync(q)
  local first = redis.call('ZRANGE', q.k.eligible, '0', '0')[1]
  if first == nil then return nil end
  local t = tenant(q, tonumber(string.sub(first, SEQW + 1, SEQW + TIDW)))
  local first2 = heads(q, t, '2')
  local m = first2[1]
  local j = load_job(q, string.sub(m, TIDW + PRIOW + SEQW + 1))
  redis.call('ZREM', q.k.ready, m)
  t.hseq = ready_seq(first2[2])
  redis.call('ZREM', q.k.readyat, readyat_member(j))
  j.state = 'R'
  j.attempts = j.attempts + 1
  j.leases = j.leases + 1
  j.started_at = now
  if hold == nil then
    j.unclaimed, j.deadline = nil, now + j.lease_timeout
  else
    j.unclaimed, j.deadline = true, now + hold
  end
  local body = redis.call('HGET', q.k.bodies, j.id)
  j.name = name_in(body)
  local charge = estimate(q, j)
  figure(q, t, 'w', bucket_of(now - j.ready_at))
  pend(q, q.k.running, j.deadline, running_member(j))
  q.V = t.S
  q.vdirty = true
  set_finish(q, t, t.S + charge / weight_of(q, t), now)
  j.charged = charge
  t.ready = t.ready - 1
  if t.ready == 0 then redis.call('SREM', q.k.backlog, t.tidp) end
  t.running = t.running + 1
  local r = rate_of(q, t)
  if r ~= nil then
    -- rate.after_start, then rate.limited_until
    if t.tat == nil then
      t.tat = now + interval_of(r)
    else
      t.tat = max2(t.tat, now) + interval_of(r)
    end
    redis.call('ZADD', q.k.tats, fmt(t.tat), t.tidp)
    limit_until(q, t, now)
  end
  if is_eligible(q, t) then t.S = t.F else t.S = nil end
  index(q, t)
  local record = save_job(q, j)
  return {j.id, record, body, name_of(q, t)}
end

-- -- the end of every operation -------------------------------------------------------------

-- The wake-up tokens of a queue with a cap on leased jobs (or one that had it): none while it
-- is full, and its list emptied, since a waiter woken then could take nothing (an idle relay
-- would spin on each enqueue); when the call took it from full to not full (a lease ended, or
-- the cap was raised or removed), one token per job it has room for (at most WAKE_PER_CALL).
local function wake_waiters(q)
  local room = math.huge
  if q.maxf ~= nil then room = q.maxf - in_flight(q) end
  if room <= 0 then
    q.wake = 0
    redis.call('DEL', q.k.wake)
  elseif q.full0 then
    q.wake = q.wake + math.min(room, WAKE_PER_CALL)
  end
  q.full0 = room <= 0
end

-- Write back the tenants and meta fields this call changed; wake idle workers if work
-- appeared.
local function flush(q)
  sync(q)
  for tid, t in pairs(q.dirty) do
    redis.call('HSET', q.k.tenants, t.tids, tenant_record(t))
  end
  q.dirty = {}
  if q.newcosts ~= nil then
    local f, n = {}, 0
    for name, c in pairs(q.newcosts) do
      f[n + 1], f[n + 2], n = name, struct.pack(COST_FORMAT, c.runs, c.mean), n + 2
    end
    redis.call('HSET', q.k.costs, unpack(f, 1, n))
    q.newcosts = nil
  end
  if q.nfigs > 0 then
    for f, n in pairs(q.figs) do redis.call('HINCRBY', q.k.fig, f, n) end
    redis.call('EXPIRE', q.k.fig, FIG_TTL)
    q.figs, q.nfigs = {}, 0
  end
  save_meta(q)
  if q.maxf ~= nil or q.full0 then wake_waiters(q) end
  if q.wake > 0 then
    local tokens = {}
    for i = 1, math.min(q.wake, WAKE_PER_CALL) do tokens[i] = '1' end
    if redis.call('LPUSH', q.k.wake, unpack(tokens)) > WAKE_MAX then
      redis.call('LTRIM', q.k.wake, '0', WAKE_LAST)
    end
    q.wake = 0
  end
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

-- The oldest ready_at of a tenant's ready jobs, as the raw readyat member (or false).
local function oldest_member(q, t)
  local hi = '(' .. pad(t.tid + 1, TIDW)
  return redis.call('ZRANGEBYLEX', q.k.readyat, '[' .. t.tidp, hi, 'LIMIT', '0', '1')[1] or false
end

-- -- per-lease operations (ack, ack_many, heartbeat) --------------------------------------

-- The job held under the one lease in ARGV[1] (job_id) and ARGV[2] (lease number), in the
-- queue of the first key block: q, j; or nil, nil and the reply for a lost lease ({'nf'}, or
-- {'exp', deadline}), for ack, fail and release.
local function one_held(now)
  local q = open_queue(1, '')
  local j, problem = held(q, ARGV[1], ARGV[2], now)
  if problem == 'nf' then return nil, nil, {'nf'} end
  if problem == 'exp' then return nil, nil, {'exp', fmt(j.deadline)} end
  return q, j, nil
end

-- A held job succeeded: the run's real cost replaces what it was charged, and is a sample of
-- its name's learned cost. With a result (JSON text) kept for `keep` seconds, the job is
-- pruned once that expires (expiring), not by the retention (done).
local function succeed(q, j, now, result, keep)
  local t = tenant(q, j.tid)
  figure(q, t, 'r', bucket_of(now - j.started_at))  -- a run time alone: succeeded
  learn(q, j, now)
  end_run(q, t, j, now, now)
  t.succeeded = t.succeeded + 1
  t.kept = t.kept + 1
  j.state = 'S'
  j.finished_at = now
  if result == nil then
    redis.call('ZADD', q.k.done, fmt(now), seq_member(j))
  else
    j.result_until = now + keep
    redis.call('HSET', q.k.results, j.id, result)
    redis.call('ZADD', q.k.expiring, fmt(j.result_until), seq_member(j))
  end
  retag(q, t)
  save_job(q, j)
end

-- ARGV from [first] on holds 3 values per token (block, job_id, lease number text): apply
-- fn(q, j) to each held job in order and collect its answer; '' for a lost lease (expired or
-- unknown: nothing is changed for it). Tenants are written back once per queue at the end.
local function each_held(now, first, fn)
  local queues = {}
  local out = {}
  for a = first, #ARGV, 3 do
    local b = tonumber(ARGV[a])
    local q = queues[b]
    if q == nil then q = open_queue(b, ''); queues[b] = q end
    local j, problem = held(q, ARGV[a + 1], ARGV[a + 2], now)
    if problem then out[#out + 1] = '' else out[#out + 1] = fn(q, j) end
  end
  for _, q in pairs(queues) do flush(q) end
  return out
end

-- -- end of _lib_jobs.lua ---------------------------------------------------------------------
