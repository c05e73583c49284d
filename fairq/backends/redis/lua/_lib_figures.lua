-- _lib_figures.lua: the figures a call counts (fairq/figures.py): wait and run times in the
-- histogram's buckets, outcomes; `flush` (_lib_flush.lua) writes the call's tally. Part of the
-- one library scripts.py loads (NEEDS there says which parts come before it); it only
-- defines locals.

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

-- -- end of _lib_figures.lua ----------------------------------------------------------------
