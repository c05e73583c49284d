"""Throttling by re-routing to weighted slower queues (sidekiq-fair_tenant).

Each enqueue is counted in its tenant's sliding window; when a rule's window holds more than
its threshold, the job goes to that rule's slower queue (the last matching rule wins; the rule
arithmetic is ``fairq.policy.throttle``, the same that fairq's own re-routing uses). Workers
poll the queues in a weighted random order drawn afresh for every fetch (Sidekiq's
``BasicFetch``): each queue is FIFO. Kept: the windows, the rules, the weighted order. Left
out: the window is per tenant only (the gem's is per job class and tenant, one class here).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence

from fairq.policy import throttle
from fairq.policy.throttle import Throttle
from fairq.sim.engine import SimJob

MAIN = "main"
#: The article's example: 6 : 3 : 1, and its rules scaled to the simulated hour.
DEFAULT_QUEUES: dict[str, float] = {MAIN: 6.0, "throttled": 3.0, "superslow": 1.0}
DEFAULT_RULES = (Throttle(100, 3600.0, "throttled"), Throttle(40, 60.0, "superslow"))


class Throttled:
    name = "throttled"

    def __init__(
        self,
        *,
        queues: dict[str, float] | None = None,
        rules: Sequence[Throttle] = DEFAULT_RULES,
    ) -> None:
        self.weights = dict(queues or DEFAULT_QUEUES)
        if MAIN not in self.weights or any(r.queue not in self.weights for r in rules):
            raise ValueError(f"queues {sorted(self.weights)} must hold {MAIN!r} and every rule's")
        self.rules = list(rules)
        self._queues: dict[str, deque[SimJob]] = {q: deque() for q in self.weights}
        self._windows: dict[str, list[float]] = {}
        self._rng = random.Random(0)
        self.routed: dict[str, int] = dict.fromkeys(self.weights, 0)

    def start(self, workers: int, rng: random.Random) -> None:
        for jobs in self._queues.values():
            jobs.clear()
        self._windows.clear()
        self._rng = rng
        self.routed = dict.fromkeys(self.weights, 0)

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        for job in jobs:
            self._add(job, now)

    def _add(self, job: SimJob, now: float) -> None:
        queue = self._route(job.tenant, now)
        self.routed[queue] += 1
        self._queues[queue].append(job)

    def _route(self, tenant: str, now: float) -> str:
        if not self.rules:
            return MAIN
        span = throttle.window_span(self.rules)
        kept = [t for t in self._windows.get(tenant, ()) if t >= now - span]
        times = [*kept, now][-throttle.window_size(self.rules) :]
        self._windows[tenant] = times
        return throttle.choose_queue(times, now, self.rules, MAIN)

    def take(self, idle: Sequence[int], now: float) -> list[SimJob | None]:
        return [self._next() for _ in idle]  # each ask draws a polling order, found or not

    def _next(self) -> SimJob | None:
        for name in self._polling_order():
            jobs = self._queues[name]
            if jobs:
                return jobs.popleft()
        return None

    def _polling_order(self) -> list[str]:
        """Queues in weighted random order: each next one drawn by weight from the rest."""
        left = list(self.weights)
        order: list[str] = []
        while left:
            pick = self._rng.choices(left, weights=[self.weights[q] for q in left])[0]
            order.append(pick)
            left.remove(pick)
        return order

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        pass

    def wake_at(self, now: float) -> float | None:
        return None
