"""A run's figures folded as it goes, in memory that does not grow with its jobs.

A replay of 10^6 recorded jobs cannot keep every record to compute its figures at the end
(fairq.sim.metrics does, for the simulator's synthetic runs). ``Tally`` takes each record as
its job finishes (``add``, any order) and each change of a tenant's jobs waiting in time order
(``waiting``, as ``fairq.sim.engine.Simulation`` reports it), and keeps only:

* per tenant, its waits in a ``Histogram`` (log buckets: a percentile is within 0.5 % of the
  exact one, the max is exact), its first arrival and first start, its job count;
* per window of ``window`` seconds, the tenants backlogged all through it and each tenant's
  worker-seconds in it (at most windows x tenants numbers: the window is chosen so that a run
  has about 2,000 of them, ``fairq.sim.metrics.default_window``);
* the run's first arrival, last finish and busy worker-seconds.

``figures`` then gives the same ``Figures`` as ``fairq.sim.metrics.figures(whole=False)``,
with percentiles from the histograms.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from fairq.policy.metrics import Waits
from fairq.sim.engine import Record
from fairq.sim.metrics import Figures, spread, windowed

#: A histogram bucket spans a factor of GROWTH; a value is read as its bucket's geometric
#: middle, so within sqrt(GROWTH) - 1 (0.5 %) of any value in it.
GROWTH = 1.01
_LOG = math.log(GROWTH)
_TINY = 1e-6  # waits shorter than a microsecond count as no wait


@dataclass
class Histogram:
    """Counts of values in log buckets (``GROWTH``); values under ``_TINY`` count as 0."""

    counts: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    zeros: int = 0
    jobs: int = 0
    max: float = -math.inf

    def add(self, value: float) -> None:
        self.jobs += 1
        if value > self.max:
            self.max = value
        if value < _TINY:
            self.zeros += 1
        else:
            self.counts[math.floor(math.log(value / _TINY) / _LOG)] += 1

    def merge(self, other: Histogram) -> None:
        self.jobs += other.jobs
        self.zeros += other.zeros
        self.max = max(self.max, other.max)
        for bucket, count in other.counts.items():
            self.counts[bucket] += count

    def percentile(self, q: float) -> float:
        """Nearest rank, as fairq.policy.metrics.percentile; NaN when empty."""
        if not self.jobs:
            return math.nan
        rank = max(1, math.ceil(q / 100 * self.jobs))
        if rank <= self.zeros:
            return 0.0
        seen = self.zeros
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                middle: float = _TINY * GROWTH ** (bucket + 0.5)
                return min(middle, self.max)
        return self.max

    def waits(self) -> Waits:
        return Waits(
            jobs=self.jobs,
            p50=self.percentile(50),
            p99=self.percentile(99),
            max=self.max if self.jobs else math.nan,
        )


class Tally:
    """One run's figures, folded record by record (module docstring)."""

    def __init__(self, *, window: float, weights: dict[str, float]) -> None:
        self.window = window
        self.weights = weights
        self.jobs = 0
        self.busy = 0.0
        self.first = math.inf
        self.last = -math.inf
        self.waits: dict[str, Histogram] = defaultdict(Histogram)
        self.first_arrival: dict[str, float] = {}
        self.first_start: dict[str, float] = {}
        self.service: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.backlogged: dict[int, list[str]] = defaultdict(list)
        self._waiting: dict[str, int] = defaultdict(int)
        self._since: dict[str, float] = {}

    def add(self, record: Record) -> None:
        job = record.job
        tenant, arrival, start = job.tenant, job.arrival, record.start
        self.jobs += 1
        self.waits[tenant].add(start - arrival)
        if arrival < self.first:
            self.first = arrival
        if record.finish > self.last:
            self.last = record.finish
        if arrival < self.first_arrival.get(tenant, math.inf):
            self.first_arrival[tenant] = arrival
        if start < self.first_start.get(tenant, math.inf):
            self.first_start[tenant] = start
        amounts, window = self.service[tenant], self.window
        for begin, end in record.parts or ((start, record.finish),):
            self.busy += end - begin
            spread(amounts, begin, end, window)

    def waiting(self, tenant: str, change: int, now: float) -> None:
        """A change of the tenant's jobs waiting, in time order (+1s first at an instant):
        the windows all through which it had one waiting are its backlogged windows."""
        count = self._waiting[tenant] + change
        self._waiting[tenant] = count
        if change > 0 and count == 1:
            self._since[tenant] = now
        elif count == 0:
            since = self._since[tenant]
            if now > since:
                window = self.window
                for w in range(math.ceil(since / window), math.floor(now / window)):
                    self.backlogged[w].append(tenant)

    def figures(self, workers: int) -> Figures:
        per_tenant = {t: h.waits() for t, h in sorted(self.waits.items())}
        overall = Histogram()
        for histogram in self.waits.values():
            overall.merge(histogram)
        fair = windowed(self.backlogged, self.service, self.weights)
        makespan = self.last - self.first if self.jobs else 0.0
        return Figures(
            jobs=self.jobs,
            tenants=len(per_tenant),
            waits=overall.waits(),
            worst_tenant_p50=max((w.p50 for w in per_tenant.values()), default=math.nan),
            per_tenant=per_tenant,
            jain_mean=sum(fair.jain) / len(fair.jain) if fair.jain else None,
            jain_min=min(fair.jain, default=None),
            gini_mean=sum(fair.gini) / len(fair.gini) if fair.gini else None,
            windows=len(fair.jain),
            window=self.window,
            max_lag=fair.max_lag,
            contended_share=fair.contended_share,
            share_error=sum(fair.misallocated) / self.busy if self.busy > 0 else 0.0,
            utilisation=self.busy / (workers * makespan) if makespan > 0 else 1.0,
            efficiency=math.nan,
            makespan=makespan,
            makespan_bound=math.nan,
            newcomer_first_start=None,
            starvation=math.nan,
            starved_tenant=None,
        )

    def first_starts(self) -> dict[str, float]:
        """Per tenant: from its first arrival to its first start."""
        return {t: self.first_start[t] - self.first_arrival[t] for t in self.first_start}
