"""Blocking pops over tenant lists ordered by decayed activity (the Q&A's second design).

A worker pops from the tenant lists in increasing order of an activity gauge; serving a tenant
adds 1.0 to its gauge, and every gauge decays by half each ``half_life`` seconds, so the
tenant served least lately is asked first. Kept: that order and the decay. Left out: in the
Q&A each worker keeps its own gauges; here all workers share one set (the best case for the
approach). A gauge counts jobs, not seconds, so long jobs are served as cheaply as short ones.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Sequence

from fairq.sim.engine import SimJob, one_pool

_RESCALE_AT = 500.0  # half-lives since the reference time before gauges are rescaled


class DecayedActivity:
    """Gauges are stored scaled to a reference time (``a(now) = g * 2**-((now - ref)/h)``),
    so decaying every gauge at once costs nothing and the heap order never changes."""

    name = "decayed"

    def __init__(self, *, half_life: float = 60.0) -> None:
        if not half_life > 0:
            raise ValueError(f"half_life must be positive, got {half_life}")
        self.half_life = half_life
        self._lists: dict[str, deque[SimJob]] = {}
        self._gauge: dict[str, float] = {}
        self._order: dict[str, int] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._ref = 0.0

    def start(self, workers: int, rng: random.Random) -> None:
        self._lists.clear()
        self._gauge.clear()
        self._order.clear()
        self._heap.clear()
        self._ref = 0.0

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        for job in jobs:
            self._add(job, now)

    def _add(self, job: SimJob, now: float) -> None:
        jobs = self._lists.get(job.tenant)
        if jobs is None:
            jobs = self._lists[job.tenant] = deque()
        if not jobs:
            self._push(job.tenant)
        jobs.append(job)

    def _push(self, tenant: str) -> None:
        order = self._order.setdefault(tenant, len(self._order))
        heapq.heappush(self._heap, (self._gauge.get(tenant, 0.0), order, tenant))

    def take(self, idle: Sequence[int], now: float) -> list[SimJob]:
        return one_pool(self._next, idle, now)

    def _next(self, now: float) -> SimJob | None:
        if not self._heap:
            return None
        _, _, tenant = heapq.heappop(self._heap)
        jobs = self._lists[tenant]
        job = jobs.popleft()
        self._serve(tenant, now)
        if jobs:
            self._push(tenant)
        return job

    def _serve(self, tenant: str, now: float) -> None:
        halvings = (now - self._ref) / self.half_life
        if halvings > _RESCALE_AT:
            self._rescale(now)
            halvings = 0.0
        self._gauge[tenant] = self._gauge.get(tenant, 0.0) + math.pow(2.0, halvings)

    def _rescale(self, now: float) -> None:
        factor = math.pow(0.5, (now - self._ref) / self.half_life)
        self._gauge = {t: g * factor for t, g in self._gauge.items() if g * factor > 1e-12}
        self._heap = [(self._gauge.get(t, 0.0), o, t) for _, o, t in self._heap]
        heapq.heapify(self._heap)
        self._ref = now

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        pass

    def wake_at(self, now: float) -> float | None:
        return None
