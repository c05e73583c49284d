"""A pool of P job slots on a virtual clock, driving a store the way a worker does.

At every instant the pool first acks the runs that end then (one ``ack_many``), then fills its
free slots with one ``dequeue``; each job runs exactly the length the scenario gives it. Every
start is recorded with the estimate its lease was charged, so scenarios can check shares and
the scheduler's bounds at any concurrency, on any store.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fairq.contract import AckManyParams, Backend
from fairq.job import NewJob

from .helpers import enqueue, new_job, set_tenant, take


@dataclass(frozen=True)
class Start:
    at: float
    tenant: str
    name: str
    length: float  # how long it runs
    charged: float  # the estimate its lease was charged at dispatch (Lease.cost)
    acked_before: int  # runs acked before this start


def run_pool(
    backend: Backend,
    *,
    weights: Mapping[str, float],
    lengths: Mapping[str, Sequence[float]],
    slots: int,
    starts: int,
    names: Mapping[str, str] | None = None,
) -> list[Start]:
    """Backlog each tenant with ``len(lengths[tenant])`` jobs (its i-th job runs
    ``lengths[tenant][i]`` seconds; job name ``names[tenant]``, "task" by default, no cost
    declared), set the weights, and run ``slots`` at once until ``starts`` jobs started."""
    for tenant, weight in weights.items():
        set_tenant(backend, tenant, weight=weight)
    jobs: list[NewJob] = []
    length_of: dict[str, float] = {}
    for tenant, runs in lengths.items():
        name = (names or {}).get(tenant, "task")
        for length in runs:
            job = new_job(len(jobs), tenant, lease=1e6, name=name)
            jobs.append(job)
            length_of[job.id] = length
    for i in range(0, len(jobs), 500):
        enqueue(backend, jobs[i : i + 500])
    now = 0.0
    running: list[tuple[float, int, str]] = []  # (end, order, token)
    record: list[Start] = []
    acked = 0
    while len(record) < starts:
        free = slots - len(running)
        leases = take(backend, now, limit=free) if free else []
        assert leases or running, f"nothing to run at {now} after {len(record)} starts"
        for lease in leases:
            length = length_of[lease.job_id]
            heapq.heappush(running, (now + length, len(record), lease.token))
            record.append(Start(now, lease.tenant, lease.name, length, lease.cost, acked))
        now = running[0][0]
        ending: list[str] = []
        while running and running[0][0] == now:
            ending.append(heapq.heappop(running)[2])
        result = backend.ack_many(AckManyParams(tokens=ending, now=now))
        assert list(result.acked) == ending, f"runs lost at {now}: {result.lost}"
        acked += len(ending)
    return record[:starts]


def after_warm_up(record: Sequence[Start], runs: int) -> list[Start]:
    """The starts after ``runs`` runs were acked (the learned estimate's warm-up)."""
    return [s for s in record if s.acked_before >= runs]


def shares(starts: Sequence[Start], value: Callable[[Start], float]) -> dict[str, float]:
    """Each tenant's part of ``value`` summed over ``starts``."""
    total = sum(value(s) for s in starts)
    part: dict[str, float] = {}
    for s in starts:
        part[s.tenant] = part.get(s.tenant, 0.0) + value(s) / total
    return part
