"""Inspection, dead jobs and job declarations: the operator's side, not hot paths."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from fairq.backends.sqlite.events import make_ready
from fairq.backends.sqlite.records import JobRow, QueueRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.contract import (
    JobType,
    ListDeadParams,
    StatsParams,
    TenantStats,
)
from fairq.contract.jobtypes import JobSignature
from fairq.job import JobInfo, JobState
from fairq.policy import history
from fairq.policy.throttle import Throttle

# -- inspection ----------------------------------------------------------------------------------


def stats(db: sqlite3.Connection, params: StatsParams) -> list[TenantStats]:
    rows = db.execute(Q["tenants_stats"], {"queue": params.queue, "tenant": params.tenant})
    tenants = sorted((TenantRow.from_row(row) for row in rows), key=lambda t: (t.queue, t.tenant))
    queues = {name: QueueRow.get(db, name) for name in dict.fromkeys(t.queue for t in tenants)}
    oldest: dict[int, float | None] | None = None
    if len(tenants) > 1:  # one pass over the ready jobs, not a query per tenant
        found = db.execute(Q["tenants_oldest_ready"], {"queue": params.queue})
        oldest = {row["tenant_id"]: float(row["oldest"]) for row in found}
    return [stats_of(db, t, queues[t.queue], params.now, oldest) for t in tenants]


def stats_of(
    db: sqlite3.Connection,
    tenant: TenantRow,
    queue: QueueRow,
    now: float | None,
    oldest: dict[int, float | None] | None = None,
) -> TenantStats:
    """Usage is decayed to ``now`` when one is given, else shown as last recorded.
    ``oldest``: every tenant's oldest ready time read at once (a tenant not in it has none)."""
    usage = tenant.usage
    if now is not None:
        usage = history.decayed(usage, tenant.usage_at, now, queue.usage_half_life())
    ready_at = _oldest_ready(db, tenant.id) if oldest is None else oldest.get(tenant.id)
    return tenant.stats(ready_at, usage)


def _oldest_ready(db: sqlite3.Connection, tenant_id: int) -> float | None:
    """Reads all of one tenant's ready jobs (via its index): fine for stats, not for dispatch."""
    found = db.execute(Q["tenant_oldest_ready"], {"tenant_id": tenant_id}).fetchone()["oldest"]
    return None if found is None else float(found)


def get_jobs(db: sqlite3.Connection, ids: Sequence[str]) -> list[JobInfo]:
    found = (JobRow.by_id(db, job_id) for job_id in ids)
    return [job.info() for job in found if job is not None]


def list_dead(db: sqlite3.Connection, params: ListDeadParams) -> list[JobInfo]:
    rows = db.execute(
        Q["jobs_dead"], {"queue": params.queue, "tenant": params.tenant, "limit": params.limit}
    )
    return [JobRow.from_row(row).info() for row in rows]


# -- dead jobs -----------------------------------------------------------------------------------


def requeue(db: sqlite3.Connection, ids: Sequence[str], now: float) -> int:
    """Dead jobs become ready with fresh attempts, keeping their seq (and so their place)."""
    count = 0
    for job_id in ids:
        job = JobRow.by_id(db, job_id)
        if job is None or job.state is not JobState.DEAD:
            continue
        tenant = TenantRow.load(db, job.tenant_id)
        tenant.dead -= 1
        job.attempts = 0
        job.finished_at = None
        make_ready(db, job, tenant, QueueRow.get(db, job.queue), now, now)
        tenant.save(db)
        count += 1
    return count


# -- job declarations ----------------------------------------------------------------------------


def publish_job_types(db: sqlite3.Connection, types: Sequence[JobType]) -> None:
    for t in types:
        db.execute(
            Q["job_type_save"],
            {
                "name": t.name,
                "queue": t.queue,
                "tenant_arg": t.tenant_arg,
                "params": json.dumps(list(t.params)),
                "max_attempts": t.max_attempts,
                "lease_timeout": t.lease_timeout,
                "cost": t.cost,
                "throttle": json.dumps(
                    [{"threshold": r.threshold, "per": r.per, "queue": r.queue} for r in t.throttle]
                ),
                "signature": t.signature and t.signature.to_json(),
                "learn_cost": t.learn_cost,
            },
        )


def job_types(db: sqlite3.Connection) -> dict[str, JobType]:
    return {
        row["name"]: JobType(
            name=row["name"],
            queue=row["queue"],
            tenant_arg=row["tenant_arg"],
            params=tuple(json.loads(row["params"])),
            max_attempts=row["max_attempts"],
            lease_timeout=row["lease_timeout"],
            cost=row["cost"],
            throttle=tuple(Throttle(**rule) for rule in json.loads(row["throttle"])),
            signature=JobSignature.from_json(row["signature"]),
            learn_cost=bool(row["learn_cost"]),
        )
        for row in db.execute(Q["job_types_all"])
    }
