"""Round-robin over the tenants that have jobs: a ring of tenant lists, one job per turn.

The Q&A's design (a circular list of tenants in Redis, only tenants with jobs in it). The
model is the race-free version of it: a tenant joins the ring's tail when its first job
arrives and leaves when its last is taken. It ignores job length and weights: a tenant of long
jobs gets as many turns as one of short jobs, so the same number of jobs, not of seconds.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence

from fairq.sim.engine import SimJob, one_pool


class RoundRobin:
    name = "round-robin"

    def __init__(self) -> None:
        self._lists: dict[str, deque[SimJob]] = {}
        self._ring: deque[str] = deque()

    def start(self, workers: int, rng: random.Random) -> None:
        self._lists.clear()
        self._ring.clear()

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        for job in jobs:
            self._add(job, now)

    def _add(self, job: SimJob, now: float) -> None:
        jobs = self._lists.get(job.tenant)
        if jobs is None:
            jobs = self._lists[job.tenant] = deque()
            self._ring.append(job.tenant)
        jobs.append(job)

    def take(self, idle: Sequence[int], now: float) -> list[SimJob]:
        return one_pool(self._next, idle, now)

    def _next(self, now: float) -> SimJob | None:
        if not self._ring:
            return None
        tenant = self._ring.popleft()
        jobs = self._lists[tenant]
        job = jobs.popleft()
        if jobs:
            self._ring.append(tenant)
        else:
            del self._lists[tenant]
        return job

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        pass

    def wake_at(self, now: float) -> float | None:
        return None
