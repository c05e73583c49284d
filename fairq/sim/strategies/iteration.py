"""Interruptible iteration on a plain FIFO queue (Shopify's job-iteration, Sidekiq's iterable
jobs, Active Job continuations).

A long job walks a cursor; after ``slice`` seconds it checkpoints, hands its worker back and is
enqueued again at the back of the one shared queue, so whatever was enqueued meanwhile runs
before its next slice. Every job is written this way here (one that fits in a slice simply
ends). Kept: the slices, the re-enqueue at the back. Left out: the cost of a checkpoint and of
resuming (zero here), and tenants: the queue still knows none, so a tenant with many long jobs
has as many turns as it has jobs, and a flood of short jobs still goes first.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence

from fairq.errors import ConfigError
from fairq.sim.engine import Part, SimJob, one_pool


class Iteration:
    name = "iteration"

    def __init__(self, *, slice: float = 30.0) -> None:
        if not slice > 0:
            raise ConfigError(f"slice must be a positive number of seconds, got {slice}")
        self.slice = slice
        self._queue: deque[SimJob] = deque()
        self._left: dict[int, float] = {}  # job id -> seconds left after the running slice
        self.slices = 0  # runs that ended with work left (each one re-enqueued)

    def start(self, workers: int, rng: random.Random) -> None:
        self._queue.clear()
        self._left.clear()
        self.slices = 0

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        self._queue.extend(jobs)

    def take(self, idle: Sequence[int], now: float) -> list[Part]:
        return one_pool(self._next, idle, now)

    def _next(self, now: float) -> Part | None:
        if not self._queue:
            return None
        job = self._queue.popleft()
        left = self._left.pop(job.id, job.duration)
        if self.slice < left:
            self._left[job.id] = left - self.slice
        return Part(job, self.slice)

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        if job.id in self._left:  # a slice ended with work left: to the back of the queue
            self.slices += 1
            self._queue.append(job)

    def wake_at(self, now: float) -> float | None:
        return None
