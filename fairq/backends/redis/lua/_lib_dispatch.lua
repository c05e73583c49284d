-- _lib_dispatch.lua: handing out a queue's next job under a lease (dequeue.lua). Part of the
-- one library scripts.py loads (NEEDS there says which parts come before it); it only
-- defines locals.

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

-- -- end of _lib_dispatch.lua ---------------------------------------------------------------
