"""Time-driven events: promote due scheduled jobs, expire overdue leases, prune old rows.

Both scans are range reads of partial indexes (``jobs_scheduled``, ``jobs_running``) that stop
at the first row not yet due, so an idle maintenance pass costs two index probes per queue.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from fairq.backends.sqlite.events import fail_run, make_ready, vclock
from fairq.backends.sqlite.records import JobRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.contract import MaintainParams, MaintainResult

LEASE_EXPIRED_ERROR = "lease expired"


def maintain(db: sqlite3.Connection, params: MaintainParams) -> MaintainResult:
    names = queue_names(db) if params.queues is None else list(params.queues)
    promoted, expired = maintain_queues(db, names, params.now)
    pruned = 0
    if params.retention is not None:
        pruned = db.execute(Q["jobs_prune"], {"before": params.now - params.retention}).rowcount
    return MaintainResult(
        promoted=promoted, expired=expired, pruned=pruned, next_due=next_due(db, names)
    )


def queue_names(db: sqlite3.Connection) -> list[str]:
    return [row["name"] for row in db.execute(Q["queue_names"])]


def maintain_queues(db: sqlite3.Connection, names: Sequence[str], now: float) -> tuple[int, int]:
    """Per queue: first promote, then expire (queues share no state, so their order is free)."""
    promoted = expired = 0
    for name in names:
        promoted += _promote(db, name, now)
        expired += _expire(db, name, now)
    return promoted, expired


def _promote(db: sqlite3.Connection, queue: str, now: float) -> int:
    due = [row["seq"] for row in db.execute(Q["jobs_due"], {"queue": queue, "now": now})]
    if not due:
        return 0
    v = vclock(db, queue)  # promotion never moves V
    for seq in due:
        job = JobRow.by_seq(db, seq)
        tenant = TenantRow.load(db, job.tenant_id)
        tenant.scheduled -= 1
        make_ready(db, job, tenant, now, v)
        tenant.save(db)
    return len(due)


def _expire(db: sqlite3.Connection, queue: str, now: float) -> int:
    """An expired lease counts as a failed attempt that ended at its deadline, retried at once."""
    overdue = [row["seq"] for row in db.execute(Q["jobs_expired"], {"queue": queue, "now": now})]
    for seq in overdue:
        job = JobRow.by_seq(db, seq)
        assert job.deadline is not None
        tenant = TenantRow.load(db, job.tenant_id)
        fail_run(
            db, job, tenant, now=now, ended_at=job.deadline, error=LEASE_EXPIRED_ERROR, retry_at=now
        )
    return len(overdue)


def next_due(db: sqlite3.Connection, names: Sequence[str]) -> float | None:
    """The earliest moment maintenance of ``names`` will have something to do."""
    due: list[float] = []
    for name in names:
        for query in ("next_run_at", "next_deadline"):
            found = db.execute(Q[query], {"queue": name}).fetchone()["due"]
            if found is not None:
                due.append(found)
    return min(due, default=None)
