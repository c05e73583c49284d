-- _lib_leases.lua: a running job's lease: found by its token, extended by a heartbeat, ended
-- by an ack, a failure, an expiry or a lapsed hold. Part of the one library scripts.py loads
-- (NEEDS there says which parts come before it); it only defines locals.

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
-- its run never started, so the attempt is given back and nothing is counted, and its
-- estimate is given back (a run of no length). Ready again at once, or cancelled if it was
-- asked to stop.
local function unclaimed(q, t, j, now)
  end_run(q, t, j, j.started_at, now)  -- a run of no length: its estimate given back
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

-- -- end of _lib_leases.lua -----------------------------------------------------------------
