-- _lib_jobs.lua: the job record, its index members and name, and the moves of a job that is
-- not running: made ready, scheduled, ended cancelled. Part of the one library scripts.py
-- loads (NEEDS there says which parts come before it); it only defines locals. The stored
-- records are documented in _lib.lua.

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

-- The oldest ready_at of a tenant's ready jobs, as the raw readyat member (or false).
local function oldest_member(q, t)
  local hi = '(' .. pad(t.tid + 1, TIDW)
  return redis.call('ZRANGEBYLEX', q.k.readyat, '[' .. t.tidp, hi, 'LIMIT', '0', '1')[1] or false
end

-- -- end of _lib_jobs.lua -------------------------------------------------------------------
