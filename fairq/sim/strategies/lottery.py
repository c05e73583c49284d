"""A planner releasing weighted lottery rounds with latency backpressure (sidekiq-fairplay).

Jobs first wait in per-tenant virtual queues. Every ``interval`` seconds a planner checks the
main queue's latency (how long its oldest job has waited); over ``threshold`` it skips the
round, otherwise it moves up to ``per_round`` jobs into the main FIFO queue, each drawn by a
lottery weighted by the tenant's weight among the tenants with jobs left. Kept: the round
clock, the backpressure, the lottery (draws that hit an emptied tenant are drawn again, which is
the same as removing it). Left out: the gem's weights are a callable evaluated each round; here
they are fixed per tenant.
"""

from __future__ import annotations

import math
import random
from collections import Counter, deque
from collections.abc import Mapping, Sequence

from fairq.sim.engine import SimJob, one_pool

#: The gem's example: 100 jobs a minute, rounds skipped while the main queue is a minute late.
DEFAULTS = {"per_round": 100, "interval": 60.0, "threshold": 60.0}


def sized(workers: int, mean_run: float) -> str:
    """The planner's settings sized to a pool (as a strategy spec): a round every second, of
    at least one job per worker and twice what the pool runs in a second, skipped while the
    main queue's oldest job has waited over a second. So the pool never runs dry for want of
    a round, and the FIFO main queue never holds more than about two rounds."""
    per_round = max(workers, math.ceil(2 * workers / max(mean_run, 1e-9)))
    return f"lottery:per_round={per_round},interval=1,threshold=1"


class Lottery:
    name = "lottery"

    def __init__(
        self,
        *,
        per_round: int = 100,
        interval: float = 60.0,
        threshold: float = 60.0,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        if per_round < 1 or not interval > 0 or threshold < 0:
            raise ValueError("per_round must be at least 1, interval positive, threshold >= 0")
        self.per_round = per_round
        self.interval = interval
        self.threshold = threshold
        self._weights = dict(weights or {})
        self._waiting: dict[str, deque[SimJob]] = {}
        self._main: deque[tuple[float, SimJob]] = deque()
        self._next_round = 0
        self._rng = random.Random(0)
        self.rounds: list[dict[str, int]] = []  # each round released: jobs per tenant
        self.skipped = 0  # rounds skipped for latency

    def start(self, workers: int, rng: random.Random) -> None:
        self._waiting.clear()
        self._main.clear()
        self._next_round = 0
        self._rng = rng
        self.rounds = []
        self.skipped = 0

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        for job in jobs:
            self._add(job, now)

    def _add(self, job: SimJob, now: float) -> None:
        self._plan_until(now, before=True)  # a round due at this instant sees every arrival
        self._waiting.setdefault(job.tenant, deque()).append(job)

    def take(self, idle: Sequence[int], now: float) -> list[SimJob]:
        return one_pool(self._next, idle, now)

    def _next(self, now: float) -> SimJob | None:
        self._plan_until(now)
        return self._main.popleft()[1] if self._main else None

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        self._plan_until(now)

    def wake_at(self, now: float) -> float | None:
        self._plan_until(now)
        return self._next_round * self.interval if self._waiting else None

    def _plan_until(self, now: float, *, before: bool = False) -> None:
        """Run every round due by ``now`` (only those before it with ``before``); rounds with
        no jobs waiting change nothing."""
        while (at := self._next_round * self.interval) < now or (at == now and not before):
            self._next_round += 1
            if not self._waiting:  # nothing to release: wait for the first round from now on
                self._next_round = math.ceil(now / self.interval)
                return
            if self._main and at - self._main[0][0] > self.threshold:
                self.skipped += 1
                continue
            self._release(at)

    def _release(self, at: float) -> None:
        drawn: Counter[str] = Counter()
        left = self.per_round
        while left and self._waiting:
            tenants = list(self._waiting)
            weights = [self._weights.get(t, 1.0) for t in tenants]
            for tenant in self._rng.choices(tenants, weights=weights, k=left):
                jobs = self._waiting.get(tenant)
                if not jobs:
                    continue  # emptied by an earlier draw: drawn again below
                self._main.append((at, jobs.popleft()))
                drawn[tenant] += 1
                left -= 1
                if not jobs:
                    del self._waiting[tenant]
        self.rounds.append(dict(drawn))
