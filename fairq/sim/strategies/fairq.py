"""fairq itself: the reference model (``fairq.model``) driven through the Backend contract.

Nothing of the scheduler is re-implemented here: each instant's arrivals are one ``enqueue``,
its idle workers one ``dequeue`` and each finish an ``ack_many``, all at the simulator's
``now``. Weights, caps (``max_running``), rate limits and the half-life of history-aware
fairness are the model's own settings. Left out: leases never expire (jobs never crash) and
there is no network or store latency, so every worker sees the decision the moment it is made.

With ``slice``, every job is an iterative one (``App.iterative_job``, docs/iteration.md): it
runs at most ``slice`` seconds, is then released (``Backend.release``: ready again at once, its
tenant charged for the run) and resumes when the scheduler picks it again. Its declared cost
is bounded by the slice: the estimate a warm store has learned for it, since only whole runs
(the last slice) are samples, never a hand-back.

With ``shards``, fairq's shuffle sharding (docs/sharding.md): each tenant gets ``shard_size`` of
the shards by fairq.policy.shards, the model puts each job in the least loaded of them, and
worker ``i`` serves shard ``i % shards`` only (a pool per shard), fairly within it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from fairq.contract import (
    AckManyParams,
    Backend,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    MaintainParams,
    QueueSettings,
    ReleaseParams,
    SetQueueParams,
    TenantSettingsParams,
)
from fairq.errors import ConfigError
from fairq.job import Lease, NewJob
from fairq.model import ReferenceModel
from fairq.policy.bounds import MAX_SECONDS
from fairq.policy.rate import Rate
from fairq.policy.shards import Sharding
from fairq.sim.engine import Part, SimJob

_QUEUE = "sim"
#: Every PRUNE_EVERY acks the model deletes the jobs that ended PRUNE_AFTER seconds ago or
#: more (four half-lives, when longer): a tenant with no job left is then forgotten, and
#: comes back as a new one, as in a store with that retention (fairq.policy.tenant.forgettable).
PRUNE_EVERY, PRUNE_AFTER = 10_000, 60.0


@dataclass(frozen=True, kw_only=True)
class Own:
    """A tenant's own settings (None: the queue's), as ``Backend.set_tenant`` stores them."""

    weight: float | None = None
    max_running: int | None = None
    rate: Rate | None = None


class Fairq:
    """Start-time fair queuing per tenant, with the model's weights, caps, rates, half-life.

    ``settings``: the queue's own (its ``queue`` name is replaced), instead of ``max_running``,
    ``rate`` and ``half_life``; ``own``: tenants' own settings, as a store keeps them (a
    replay's, fairq/sim/replay.py), on top of ``weights``. ``store``: opens the store that
    schedules (a real one records a history on the virtual clock: tests/sim)."""

    def __init__(
        self,
        *,
        weights: Mapping[str, float] | None = None,
        max_running: int | None = None,
        rate: Rate | None = None,
        half_life: float | None = None,
        shards: Sharding | None = None,
        slice: float | None = None,
        name: str = "fairq",
        settings: QueueSettings | None = None,
        own: Mapping[str, Own] | None = None,
        store: Callable[[], Backend] = ReferenceModel,
    ) -> None:
        if slice is not None and not slice > 0:
            raise ConfigError(f"slice must be a positive number of seconds, got {slice}")
        self.name = name
        self._slice = slice
        self._left: dict[int, float] = {}  # job id -> seconds left, with slices
        self._last: set[int] = set()  # jobs whose current run ends them
        self._sharding = shards
        self._queues = [_QUEUE] if shards is None else shards.queues(_QUEUE)
        self._own = {t: Own(weight=w) for t, w in (weights or {}).items()} | dict(own or {})
        if settings is None:
            settings = QueueSettings(
                queue=_QUEUE, max_running=max_running, rate=rate, half_life=half_life
            )
        self._settings = replace(settings, queue=_QUEUE)
        self._rated = settings.rate is not None or any(o.rate for o in self._own.values())
        self._store = store
        # the simulator's own model forgets its finished jobs as a store's retention does, so
        # a long run holds only its recent ones (a real store records what it ran: kept)
        self._prunes = store is ReferenceModel
        self._retention = max(PRUNE_AFTER, 4 * (self._settings.half_life or 0.0))
        self._acked = 0
        self._model: Backend = ReferenceModel()
        self._jobs: dict[str, SimJob] = {}
        self._tokens: dict[int, str] = {}

    def start(self, workers: int, rng: random.Random) -> None:
        self._model = self._store()
        self._acked = 0
        self._jobs.clear()
        self._tokens.clear()
        self._left.clear()
        self._last.clear()
        if self._sharding is not None and workers < self._sharding.count:
            raise ConfigError(
                f"fairq with shards needs a worker per shard: {workers} workers, "
                f"{self._sharding.count} shards; add workers or lower shards"
            )
        for queue in self._queues:
            settings = replace(self._settings, queue=queue)
            self._model.set_queue(SetQueueParams(settings=settings, now=0.0))
            for tenant, own in sorted(self._own.items()):
                self._model.set_tenant(
                    TenantSettingsParams(
                        queue=queue,
                        tenant=tenant,
                        now=0.0,
                        weight=own.weight,
                        max_running=own.max_running,
                        rate=own.rate,
                    )
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
                    name=job.name,
                    queue=_QUEUE,
                    tenant=job.tenant,
                    payload="",
                    priority=job.priority,
                    run_at=now,
                    max_attempts=1,
                    lease_timeout=MAX_SECONDS,
                    cost=job.cost if self._slice is None else min(job.cost, self._slice),
                    shards=self._shards_of(job.tenant),
                )
            )
        self._model.enqueue(EnqueueParams(jobs=new, now=now))

    def _shards_of(self, tenant: str) -> list[str]:
        if self._sharding is None:
            return []
        return self._sharding.queues_of(_QUEUE, tenant)

    def take(self, idle: Sequence[int], now: float) -> Sequence[SimJob | Part | None]:
        """One ``dequeue`` for all the idle workers: the contract makes a batch of ``limit``
        the same as that many single dequeues at the same ``now``. With nothing waiting there
        is nothing to ask (unless rate limits are on: the model ends them as it dequeues)."""
        if not self._jobs and not self._rated:
            return []
        if self._sharding is not None:
            return self._take_per_shard(idle, now)
        params = DequeueParams(queues=[_QUEUE], worker_id="sim", now=now, limit=len(idle))
        return [self._leased(lease) for lease in self._model.dequeue(params).leases]

    def _take_per_shard(self, idle: Sequence[int], now: float) -> list[SimJob | Part | None]:
        """Each idle worker asks its own shard; a shard with no work leaves it idle."""
        handed: list[SimJob | Part | None] = []
        for worker in idle:
            shard = self._queues[worker % len(self._queues)]
            params = DequeueParams(queues=[shard], worker_id="sim", now=now, limit=1)
            leases = self._model.dequeue(params).leases
            handed.append(self._leased(leases[0]) if leases else None)
        return handed

    def _leased(self, lease: Lease) -> SimJob | Part:
        job = self._jobs.pop(lease.job_id)
        self._tokens[job.id] = lease.token
        if self._slice is None:
            return job
        left = self._left.pop(job.id, job.duration)
        if self._slice >= left:
            self._last.add(job.id)
        else:
            self._left[job.id] = left - self._slice
        return Part(job, self._slice)

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        """The end of a run: an ack, or (a slice ended with work left) a release."""
        token = self._tokens.pop(job.id)
        if self._slice is None or job.id in self._last:
            self._last.discard(job.id)
            self._model.ack_many(AckManyParams(tokens=[token], now=now))
            self._acked += 1
            if self._prunes and self._acked % PRUNE_EVERY == 0:
                params = MaintainParams(now=now, queues=self._queues, retention=self._retention)
                self._model.maintain(params)
        else:
            self._model.release(ReleaseParams(token=token, now=now))
            self._jobs[str(job.id)] = job

    def held(self) -> str:
        """Where the store has the jobs never handed to a worker, for a run that ends with
        jobs held: running ones were leased to nobody (a dequeue's reply lost), missing ones
        are gone from the store (emptied by someone else meanwhile), ready ones were never
        dequeued."""
        ids = sorted(self._jobs, key=int)
        states = {i.id: i.state.value for i in self._model.get_jobs(GetJobsParams(ids=ids))}
        counts = Counter(states.get(job_id, "missing") for job_id in ids)
        return "in its store: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))

    def wake_at(self, now: float) -> float | None:
        """A rate-limited tenant becomes eligible again with no event of its own."""
        if not self._rated:
            return None
        due = self._model.maintain(MaintainParams(now=now, queues=self._queues)).next_due
        return due if due is not None and due < now + MAX_SECONDS / 2 else None
