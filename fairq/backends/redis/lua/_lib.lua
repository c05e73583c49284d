-- _lib.lua: shared helpers, prepended to every operation script when it is loaded.
--
-- Not a script of its own: it only defines local functions. Each operation script that
-- follows states its own contract (KEYS, ARGV, keys touched, return value).
--
-- Layout (docs in fairq/backends/redis/keys.py). Every per-queue key carries the hash tag
-- {queue}; a queue's keys arrive in KEYS as one block of QUEUE_KEYS consecutive names:
--   meta      hash   V (virtual clock), weight, cap (queue defaults), ntid (tenant id counter)
--   tenants   hash   tid -> "F,S,ready,scheduled,running,succeeded,failed,dead,weight,cap,eseq"
--   tids      hash   tenant name (exact bytes) -> tid
--   tnames    hash   tid -> tenant name
--   eligible  zset   score S, member head_seq(16) .. tid(10): order is exactly (S, head_seq)
--   ready     zset   all scores 0, member tid(10) .. prio(10) .. seq(16) .. job_id (lex order)
--   readyat   zset   all scores 0, member tid(10) .. sortable(ready_at)(8) .. seq(16)
--   scheduled zset   score run_at, member seq(16) .. job_id: order (run_at, seq)
--   running   zset   score deadline, member seq(16) .. job_id: order (deadline, seq)
--   dead      zset   score finished_at, member seq(16) .. job_id
--   done      zset   score finished_at, member seq(16) .. job_id (succeeded, for pruning)
--   jobs      hash   job_id -> "seq,tid,state,priority,enqueued_at,run_at,ready_at,
--                               max_attempts,lease_timeout,cost,attempts,started_at,
--                               deadline,finished_at"
--   bodies    hash   job_id -> len(name) .. ":" .. name .. payload (never parsed here)
--   errors    hash   job_id -> last error text
--   backlog   set    tids with ready > 0 (what set_queue must refresh)
--   wake      list   wake-up tokens for idle workers (BLPOP), trimmed to WAKE_MAX
--
-- Floats are stored as string.format('%.17g', x), which reads back to the same double.
-- The tag arithmetic copies fairq/policy/fairness.py expression for expression.

local QUEUE_KEYS = 16
local TIDW, SEQW, PRIOW = 10, 16, 10
local MIN_CHARGE = 0.001
local WAKE_MAX, WAKE_PER_CALL = 64, 8
local PRIO_TOP = 2147483647

local function fmt(x) return string.format('%.17g', x) end
local function int(x) return string.format('%d', x) end
local function pad(n, width) return string.format('%0' .. width .. 'd', n) end
local function opt(s) if s == '' or s == nil then return nil end return tonumber(s) end
local function optfmt(x) if x == nil then return '' end return fmt(x) end
local function optint(x) if x == nil then return '' end return int(x) end

-- Python's max(a, b): the first argument unless the second is strictly greater.
local function max2(a, b) if b > a then return b end return a end

local function split(s)
  local out, n = {}, 0
  for v in string.gmatch(s .. ',', '([^,]*),') do n = n + 1; out[n] = v end
  return out
end

-- ready_at as 8 bytes whose byte order is the order of the doubles (IEEE 754 trick).
local function sortable(x)
  local s = struct.pack('>d', x)
  local b1 = string.byte(s, 1)
  if b1 >= 128 then
    local t = {}
    for i = 1, 8 do t[i] = string.char(255 - string.byte(s, i)) end
    return table.concat(t)
  end
  return string.char(b1 + 128) .. string.sub(s, 2)
end

-- -- queues ---------------------------------------------------------------------------------

local function open_queue(block, name)
  local base = (block - 1) * QUEUE_KEYS
  local k = {
    meta = KEYS[base + 1], tenants = KEYS[base + 2], tids = KEYS[base + 3],
    tnames = KEYS[base + 4], eligible = KEYS[base + 5], ready = KEYS[base + 6],
    readyat = KEYS[base + 7], scheduled = KEYS[base + 8], running = KEYS[base + 9],
    dead = KEYS[base + 10], done = KEYS[base + 11], jobs = KEYS[base + 12],
    bodies = KEYS[base + 13], errors = KEYS[base + 14], backlog = KEYS[base + 15],
    wake = KEYS[base + 16],
  }
  local m = redis.call('HMGET', k.meta, 'V', 'weight', 'cap')
  return {
    k = k, name = name, V = opt(m[1]) or 0.0, weight = opt(m[2]) or 1.0, cap = opt(m[3]),
    vdirty = false, tenants = {}, dirty = {}, wake = 0,
  }
end

-- -- tenants --------------------------------------------------------------------------------

local function tenant_from(q, tid, raw)
  local f = split(raw)
  return {
    tid = tid, tidp = pad(tid, TIDW), F = tonumber(f[1]), S = opt(f[2]),
    ready = tonumber(f[3]), scheduled = tonumber(f[4]), running = tonumber(f[5]),
    succeeded = tonumber(f[6]), failed = tonumber(f[7]), dead = tonumber(f[8]),
    weight = opt(f[9]), cap = opt(f[10]), eseq = f[11],
  }
end

local function tenant_record(t)
  return table.concat({
    fmt(t.F), optfmt(t.S), int(t.ready), int(t.scheduled), int(t.running),
    int(t.succeeded), int(t.failed), int(t.dead), optfmt(t.weight), optint(t.cap), t.eseq,
  }, ',')
end

local function touch(q, t)
  q.dirty[t.tid] = t
  return t
end

-- The tenant with id tid (a number), loaded once per script call.
local function tenant(q, tid)
  local t = q.tenants[tid]
  if t == nil then
    t = tenant_from(q, tid, redis.call('HGET', q.k.tenants, int(tid)))
    q.tenants[tid] = t
  end
  return touch(q, t)
end

-- The tenant named name, created (F = 0, no settings) when the queue has not seen it.
local function tenant_named(q, name)
  local tid = redis.call('HGET', q.k.tids, name)
  if tid then return tenant(q, tonumber(tid)) end
  local n = redis.call('HINCRBY', q.k.meta, 'ntid', 1)
  redis.call('HSET', q.k.tids, name, int(n))
  redis.call('HSET', q.k.tnames, int(n), name)
  local t = tenant_from(q, n, '0,,0,0,0,0,0,0,,,')
  q.tenants[n] = t
  return touch(q, t)
end

local function weight_of(q, t) if t.weight ~= nil then return t.weight end return q.weight end
local function cap_of(q, t) if t.cap ~= nil then return t.cap end return q.cap end

local function is_eligible(q, t)
  local cap = cap_of(q, t)
  return t.ready > 0 and (cap == nil or t.running < cap)
end

-- The first member of the tenant's ready FIFO (priority DESC, seq ASC), or nil.
local function head(q, t)
  local hi = '(' .. pad(t.tid + 1, TIDW)
  return redis.call('ZRANGEBYLEX', q.k.ready, '[' .. t.tidp, hi, 'LIMIT', 0, 1)[1]
end

-- Record the tenant's current (S, head_seq) in the eligible index (or take it out).
local function index(q, t)
  local seq = ''
  if t.S ~= nil then
    local m = head(q, t)
    if m then seq = string.sub(m, TIDW + PRIOW + 1, TIDW + PRIOW + SEQW) end
  end
  if t.eseq ~= '' and t.eseq ~= seq then
    redis.call('ZREM', q.k.eligible, t.eseq .. t.tidp)
  end
  if seq ~= '' then
    redis.call('ZADD', q.k.eligible, fmt(t.S), seq .. t.tidp)
    if t.eseq == '' then q.wake = q.wake + 1 end
  end
  t.eseq = seq
end

-- "Refresh": newly eligible -> S = max(F, V); not eligible -> no S; else S stays.
local function refresh(q, t)
  if not is_eligible(q, t) then
    t.S = nil
  elseif t.S == nil then
    t.S = max2(t.F, q.V)
  end
  index(q, t)
end

-- After a run's cost is settled: an eligible tenant starts again at max(F, V).
local function retag(q, t)
  if is_eligible(q, t) then t.S = max2(t.F, q.V) else t.S = nil end
  index(q, t)
end

-- -- jobs -----------------------------------------------------------------------------------

local function job_from(id, raw)
  local f = split(raw)
  return {
    id = id, seq = tonumber(f[1]), tid = tonumber(f[2]), state = f[3],
    priority = tonumber(f[4]), enqueued_at = tonumber(f[5]), run_at = tonumber(f[6]),
    ready_at = opt(f[7]), max_attempts = tonumber(f[8]), lease_timeout = tonumber(f[9]),
    cost = tonumber(f[10]), attempts = tonumber(f[11]), started_at = opt(f[12]),
    deadline = opt(f[13]), finished_at = opt(f[14]),
  }
end

local function job_record(j)
  return table.concat({
    int(j.seq), int(j.tid), j.state, int(j.priority), fmt(j.enqueued_at), fmt(j.run_at),
    optfmt(j.ready_at), int(j.max_attempts), fmt(j.lease_timeout), fmt(j.cost),
    int(j.attempts), optfmt(j.started_at), optfmt(j.deadline), optfmt(j.finished_at),
  }, ',')
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

local function seq_member(j) return pad(j.seq, SEQW) .. j.id end

local function ready_member(j)
  return pad(j.tid, TIDW) .. pad(PRIO_TOP - j.priority, PRIOW) .. pad(j.seq, SEQW) .. j.id
end

local function readyat_member(j)
  return pad(j.tid, TIDW) .. sortable(j.ready_at) .. pad(j.seq, SEQW)
end

-- Into its tenant's ready FIFO ("make ready"), then refresh.
local function make_ready(q, t, j, now)
  j.state = 'r'
  j.ready_at = now
  t.ready = t.ready + 1
  if t.ready == 1 then redis.call('SADD', q.k.backlog, t.tidp) end
  redis.call('ZADD', q.k.ready, 0, ready_member(j))
  redis.call('ZADD', q.k.readyat, 0, readyat_member(j))
  q.wake = q.wake + 1
  refresh(q, t)
end

-- The running job a lease names: job, or nil and 'nf' / 'exp' (nothing is changed).
local function held(q, id, attempt_text, now)
  local j = load_job(q, id)
  if j == nil or j.state ~= 'R' or int(j.attempts) ~= attempt_text then return nil, 'nf' end
  if now >= j.deadline then return j, 'exp' end
  return j, nil
end

-- Charge the run's real cost in place of its estimate and free its slot.
local function end_run(q, t, j, ended_at)
  local charge = max2(ended_at - j.started_at, MIN_CHARGE)
  t.F = t.F + (charge - j.cost) / weight_of(q, t)
  t.running = t.running - 1
  redis.call('ZREM', q.k.running, seq_member(j))
  j.deadline = nil
end

-- A failed attempt (or an expired lease): dead, ready again, or scheduled for retry_at.
local function fail_job(q, t, j, now, ended_at, err, retry_at)
  end_run(q, t, j, ended_at)
  t.failed = t.failed + 1
  redis.call('HSET', q.k.errors, j.id, err)
  if retry_at == nil or j.attempts >= j.max_attempts then
    j.state = 'd'
    j.finished_at = now
    t.dead = t.dead + 1
    redis.call('ZADD', q.k.dead, fmt(now), seq_member(j))
  elseif retry_at <= now then
    make_ready(q, t, j, now)
  else
    j.state = 's'
    j.run_at = retry_at
    t.scheduled = t.scheduled + 1
    redis.call('ZADD', q.k.scheduled, fmt(retry_at), seq_member(j))
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
    make_ready(q, t, j, now)
    save_job(q, j)
  end
  return #due
end

-- Leases with deadline <= now fail with "lease expired", in (deadline, seq) order.
local function expire(q, now)
  local due = redis.call('ZRANGEBYSCORE', q.k.running, '-inf', fmt(now))
  for _, m in ipairs(due) do
    local j = load_job(q, string.sub(m, SEQW + 1))
    local t = tenant(q, j.tid)
    fail_job(q, t, j, now, j.deadline, 'lease expired', now)
  end
  return #due
end

-- -- dispatch -------------------------------------------------------------------------------

-- The queue's next job by (S, head_seq): it runs under a lease. Returns the reply entry.
local function dispatch(q, now)
  local first = redis.call('ZRANGE', q.k.eligible, 0, 0)[1]
  if first == nil then return nil end
  local t = tenant(q, tonumber(string.sub(first, SEQW + 1)))
  local m = head(q, t)
  local j = load_job(q, string.sub(m, TIDW + PRIOW + SEQW + 1))
  redis.call('ZREM', q.k.ready, m)
  redis.call('ZREM', q.k.readyat, readyat_member(j))
  j.state = 'R'
  j.attempts = j.attempts + 1
  j.started_at = now
  j.deadline = now + j.lease_timeout
  redis.call('ZADD', q.k.running, fmt(j.deadline), seq_member(j))
  q.V = t.S
  q.vdirty = true
  t.F = t.S + j.cost / weight_of(q, t)
  t.ready = t.ready - 1
  if t.ready == 0 then redis.call('SREM', q.k.backlog, t.tidp) end
  t.running = t.running + 1
  if is_eligible(q, t) then t.S = t.F else t.S = nil end
  index(q, t)
  local record = save_job(q, j)
  local name = redis.call('HGET', q.k.tnames, int(t.tid))
  return {j.id, record, redis.call('HGET', q.k.bodies, j.id), name}
end

-- -- the end of every script ----------------------------------------------------------------

-- Write back the tenants and the clock this call changed; wake idle workers if work appeared.
local function flush(q)
  for tid, t in pairs(q.dirty) do
    redis.call('HSET', q.k.tenants, int(tid), tenant_record(t))
  end
  q.dirty = {}
  if q.vdirty then
    redis.call('HSET', q.k.meta, 'V', fmt(q.V))
    q.vdirty = false
  end
  if q.wake > 0 then
    local tokens = {}
    for i = 1, math.min(q.wake, WAKE_PER_CALL) do tokens[i] = '1' end
    redis.call('LPUSH', q.k.wake, unpack(tokens))
    redis.call('LTRIM', q.k.wake, 0, WAKE_MAX - 1)
    q.wake = 0
  end
end

-- The oldest ready_at of a tenant's ready jobs, as the raw readyat member (or false).
local function oldest_member(q, t)
  local hi = '(' .. pad(t.tid + 1, TIDW)
  return redis.call('ZRANGEBYLEX', q.k.readyat, '[' .. t.tidp, hi, 'LIMIT', 0, 1)[1] or false
end

-- -- end of _lib.lua ------------------------------------------------------------------------
