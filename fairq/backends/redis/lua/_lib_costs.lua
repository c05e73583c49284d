-- _lib_costs.lua: learned costs (fairq/policy/cost.py): read once per call and name, charged
-- at dispatch, learned from a claimed run's end; `flush` (_lib_flush.lua) writes them back.
-- Part of the one library scripts.py loads (NEEDS there says which parts come before it); it
-- only defines locals.

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

-- -- end of _lib_costs.lua ------------------------------------------------------------------
