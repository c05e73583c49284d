"""Shuffle sharding: ``shards`` FIFO queues, each tenant on ``per_tenant`` of them, a worker
pool per shard.

Each tenant gets a random set of shards (drawn once, from the run's seed); a job goes to the
shortest of its tenant's shards, and worker ``i`` serves shard ``i % shards`` only. A flood
fills its tenant's shards, and only tenants sharing all of them wait behind it. Kept: the
shard sets, the per-shard pools, the shortest-queue choice. Left out: nothing balances the
pools, so a shard with no work leaves its workers idle while others queue (the approach's
cost).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence

from fairq.sim.engine import SimJob


class ShuffleSharding:
    name = "sharding"

    def __init__(self, *, shards: int = 4, per_tenant: int = 2) -> None:
        if not 1 <= per_tenant <= shards:
            raise ValueError(f"per_tenant must be from 1 to shards ({shards}), got {per_tenant}")
        self.shards = shards
        self.per_tenant = per_tenant
        self._queues: list[deque[SimJob]] = [deque() for _ in range(shards)]
        self._sets: dict[str, list[int]] = {}
        self._rng = random.Random(0)

    def start(self, workers: int, rng: random.Random) -> None:
        if workers < self.shards:
            raise ValueError(
                f"shuffle sharding needs a worker per shard: {workers} workers, "
                f"{self.shards} shards; add workers or lower shards"
            )
        self._queues = [deque() for _ in range(self.shards)]
        self._sets.clear()
        self._rng = rng

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        for job in jobs:
            self._add(job, now)

    def _add(self, job: SimJob, now: float) -> None:
        shards = self._sets.get(job.tenant)
        if shards is None:
            shards = self._sets[job.tenant] = self._rng.sample(range(self.shards), self.per_tenant)
        shortest = min(shards, key=lambda s: len(self._queues[s]))
        self._queues[shortest].append(job)

    def take(self, idle: Sequence[int], now: float) -> list[SimJob | None]:
        """Each worker serves only its own shard."""
        return [self._next(worker) for worker in idle]

    def _next(self, worker: int) -> SimJob | None:
        jobs = self._queues[worker % self.shards]
        return jobs.popleft() if jobs else None

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        pass

    def wake_at(self, now: float) -> float | None:
        return None
