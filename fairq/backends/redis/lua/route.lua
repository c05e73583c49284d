-- route.lua: record enqueues in their throttle windows and choose each job's queue.
--
-- KEYS: the (job name, tenant) window lists of the jobs routed, all under one home queue's
--       hash tag (so one Cluster slot); a key may repeat when a batch has several jobs of
--       the same (name, tenant).
-- ARGV: [1] now (see `now_of`), then per job, in enqueue order: key index (into KEYS), window size
--       (max threshold + 1), span (max per), home queue, rule count R, then R x (threshold,
--       per, queue), least to most restrictive.
-- Touches: the window lists only (each is given a TTL of span).
-- Returns: the chosen queue per job, in order.
--
-- Record + decide is one atomic step (ReferenceModel._route, policy/throttle.py): keep the
-- window's times t >= now - span, append now, keep the newest `size`; then a rule matches
-- when more than `threshold` times lie in [now - per, now], and the last match wins. The job
-- itself is stored afterwards by enqueue.lua in the chosen queue, whose keys may live in
-- another slot. Each list entry is "time:span", so a reader knows the span of the last
-- routing (what the model filters by) without another key.

register_once('route', function()
  local now = now_of(ARGV[1])
  local out = {}
  local a = 2
  while a <= #ARGV do
    local key = KEYS[tonumber(ARGV[a])]
    local size = tonumber(ARGV[a + 1])
    local span = tonumber(ARGV[a + 2])
    local home = ARGV[a + 3]
    local nrules = tonumber(ARGV[a + 4])
    a = a + 5

    local stored = redis.call('LRANGE', key, 0, -1)
    local kept, gap = {}, false
    for _, entry in ipairs(stored) do
      local t = tonumber(string.sub(entry, 1, string.find(entry, ':', 1, true) - 1))
      if t >= now - span then
        kept[#kept + 1] = t
      elseif #kept > 0 then
        gap = true  -- an old time after a kept one (the clock went back): rewrite the list
      end
    end
    kept[#kept + 1] = now
    local first = math.max(1, #kept - size + 1)
    local times = {}
    for i = first, #kept do times[#times + 1] = kept[i] end

    local suffix = ':' .. fmt(span)
    if gap then
      redis.call('DEL', key)
      for _, t in ipairs(times) do redis.call('RPUSH', key, fmt(t) .. suffix) end
    else
      redis.call('RPUSH', key, fmt(now) .. suffix)
      redis.call('LTRIM', key, -#times, -1)
    end
    redis.call('PEXPIRE', key, math.ceil(span * 1000))

    local chosen = home
    for _ = 1, nrules do
      local threshold, per, queue = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), ARGV[a + 2]
      a = a + 3
      local count = 0
      for _, t in ipairs(times) do
        if now - per <= t and t <= now then count = count + 1 end
      end
      if count > threshold then chosen = queue end
    end
    out[#out + 1] = chosen
  end
  return out
end)
