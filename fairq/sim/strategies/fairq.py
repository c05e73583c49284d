"""fairq itself: the reference model (``fairq.model``) driven through the Backend contract.

Nothing of the scheduler is re-implemented here: each instant's arrivals are one ``enqueue``,
its idle workers one ``dequeue`` and each finish an ``ack_many``, all at the simulator's
``now``. Weights, caps (``max_running``), rate limits and the half-life of history-aware
fairness are the model's own settings. Left out: leases never expire (jobs never crash) and
there is no network or store latency, so every worker sees the decision the moment it is made.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    MaintainParams,
    QueueSettings,
    SetQueueParams,
    TenantSettingsParams,
)
from fairq.job import NewJob
from fairq.model import ReferenceModel
from fairq.policy.bounds import MAX_SECONDS
from fairq.policy.rate import Rate
from fairq.sim.engine import SimJob

_QUEUE = "sim"


class Fairq:
    """Start-time fair queuing per tenant, with the model's weights, caps, rates, half-life."""

    def __init__(
        self,
        *,
        weights: Mapping[str, float] | None = None,
        max_running: int | None = None,
        rate: Rate | None = None,
        half_life: float | None = None,
        name: str = "fairq",
    ) -> None:
        self.name = name
        self._weights = dict(weights or {})
        self._settings = QueueSettings(
            queue=_QUEUE, max_running=max_running, rate=rate, half_life=half_life
        )
        self._model = ReferenceModel()
        self._jobs: dict[str, SimJob] = {}
        self._tokens: dict[int, str] = {}

    def start(self, workers: int, rng: random.Random) -> None:
        self._model = ReferenceModel()
        self._jobs.clear()
        self._tokens.clear()
        self._model.set_queue(SetQueueParams(settings=self._settings, now=0.0))
        for tenant, weight in sorted(self._weights.items()):
            self._model.set_tenant(
                TenantSettingsParams(queue=_QUEUE, tenant=tenant, now=0.0, weight=weight)
            )

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        """One instant's arrivals as one ``enqueue``."""
        new: list[NewJob] = []
        for job in jobs:
            key = str(job.id)
            self._jobs[key] = job
            new.append(
                NewJob(
                    id=key,
                    name="sim",
                    queue=_QUEUE,
                    tenant=job.tenant,
                    payload="",
                    run_at=now,
                    max_attempts=1,
                    lease_timeout=MAX_SECONDS,
                    cost=job.cost,
                )
            )
        self._model.enqueue(EnqueueParams(jobs=new, now=now))

    def take(self, idle: Sequence[int], now: float) -> list[SimJob]:
        """One ``dequeue`` for all the idle workers: the contract makes a batch of ``limit``
        the same as that many single dequeues at the same ``now``. With nothing waiting there
        is nothing to ask (unless rate limits are on: the model ends them as it dequeues)."""
        if not self._jobs and self._settings.rate is None:
            return []
        params = DequeueParams(queues=[_QUEUE], worker_id="sim", now=now, limit=len(idle))
        handed: list[SimJob] = []
        for lease in self._model.dequeue(params).leases:
            job = self._jobs.pop(lease.job_id)
            self._tokens[job.id] = lease.token
            handed.append(job)
        return handed

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        token = self._tokens.pop(job.id)
        self._model.ack_many(AckManyParams(tokens=[token], now=now))

    def wake_at(self, now: float) -> float | None:
        """A rate-limited tenant becomes eligible again with no event of its own."""
        if self._settings.rate is None:
            return None
        due = self._model.maintain(MaintainParams(now=now, queues=[_QUEUE])).next_due
        return due if due is not None and due < now + MAX_SECONDS / 2 else None
