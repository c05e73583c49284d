"""Plain FIFO: one shared queue, oldest job first, whoever enqueued it.

The default of every job queue (Sidekiq, Celery, RQ). The model keeps the order and nothing
else; a flood from one tenant sits in front of every job enqueued after it.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence

from fairq.sim.engine import SimJob, one_pool


class Fifo:
    name = "fifo"

    def __init__(self) -> None:
        self._queue: deque[SimJob] = deque()

    def start(self, workers: int, rng: random.Random) -> None:
        self._queue.clear()

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        for job in jobs:
            self._add(job, now)

    def _add(self, job: SimJob, now: float) -> None:
        self._queue.append(job)

    def take(self, idle: Sequence[int], now: float) -> list[SimJob]:
        return one_pool(self._next, idle, now)

    def _next(self, now: float) -> SimJob | None:
        return self._queue.popleft() if self._queue else None

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        pass

    def wake_at(self, now: float) -> float | None:
        return None
