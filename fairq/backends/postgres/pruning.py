"""Maintenance's prune: delete old succeeded jobs, then forget tenants left with nothing stored.

The prune covers every queue, also those whose lock the maintenance call does not hold. So a
tenant row may be deleted while another transaction is about to lock it: ``Events`` re-creates
a row it was creating or locking for an enqueue, and skips one it only meant to unlimit or
resettle. A tenant with a job stored is never deleted (its counts say so, under its row lock),
so every path that reaches a tenant through a job still finds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import Row
from fairq.policy.tenant import forgettable


@dataclass
class StoredCounts:
    """What forgetting reads of a tenant row (``fairq.policy.tenant.StoredTenant``)."""

    ready: int
    scheduled: int
    running: int
    dead: int
    kept: int
    tat: float | None


def prune(cur: Cursor[Row], q: Queries, before: float, now: float) -> int:
    """Delete succeeded and cancelled jobs finished before ``before``, and those whose kept
    result expired by ``now``; returns how many."""
    gone = cur.execute(q["jobs_prune"], {"before": before, "now": now}).fetchall()
    if not gone:
        return 0
    args = {"ids": [row["tenant_id"] for row in gone], "counts": [row["pruned"] for row in gone]}
    forgotten = [
        row["id"]
        for row in cur.execute(q["tenants_unkeep"], args).fetchall()
        if forgettable(_counts(row), own_settings=row["own_settings"], now=now)
    ]
    if forgotten:
        cur.execute(q["tenants_forget"], {"ids": forgotten})
    return sum(row["pruned"] for row in gone)


def _counts(row: Row) -> StoredCounts:
    return StoredCounts(
        ready=row["ready"],
        scheduled=row["scheduled"],
        running=row["running"],
        dead=row["dead"],
        kept=row["kept"],
        tat=row["tat"],
    )
