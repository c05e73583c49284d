"""Per-tenant concurrency slots: a job whose tenant has no free slot is rescheduled later.

The dev.to article's design: one shared FIFO queue; a worker takes the head job and tries to
claim one of its tenant's ``slots`` (an atomic conditional update); when none is free the job
is put back as a scheduled job ``retry`` seconds later (60 in the article) and the worker takes
the next one. Kept: the cap, the reschedule delay, the rescheduled job joining the back of the
queue when due. Left out: the time a worker spends fetching and rescheduling (zero here).
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict, deque
from collections.abc import Sequence

from fairq.sim.engine import SimJob, one_pool


class Slots:
    name = "slots"

    def __init__(self, *, slots: int = 2, retry: float = 60.0) -> None:
        if slots < 1 or not retry > 0:
            raise ValueError(f"slots must be at least 1 and retry positive, got {slots}, {retry}")
        self.slots = slots
        self.retry = retry
        self._ready: deque[SimJob] = deque()
        self._scheduled: list[tuple[float, int, SimJob]] = []
        self._running: defaultdict[str, int] = defaultdict(int)
        self.rescheduled = 0  # how many times a job was put back (the approach's overhead)

    def start(self, workers: int, rng: random.Random) -> None:
        self._ready.clear()
        self._scheduled.clear()
        self._running.clear()
        self.rescheduled = 0

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        for job in jobs:
            self._add(job, now)

    def _add(self, job: SimJob, now: float) -> None:
        self._ready.append(job)

    def take(self, idle: Sequence[int], now: float) -> list[SimJob]:
        return one_pool(self._next, idle, now)

    def _next(self, now: float) -> SimJob | None:
        self._promote(now)
        while self._ready:
            job = self._ready.popleft()
            if self._running[job.tenant] < self.slots:
                self._running[job.tenant] += 1
                return job
            heapq.heappush(self._scheduled, (now + self.retry, job.id, job))
            self.rescheduled += 1
        return None

    def _promote(self, now: float) -> None:
        while self._scheduled and self._scheduled[0][0] <= now:
            self._ready.append(heapq.heappop(self._scheduled)[2])

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        self._running[job.tenant] -= 1

    def wake_at(self, now: float) -> float | None:
        return self._scheduled[0][0] if self._scheduled else None
