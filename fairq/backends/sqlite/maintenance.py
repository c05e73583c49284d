"""Time-driven events: promote due scheduled jobs, expire overdue leases, end rate limits,
prune old rows.

Each pass is a range read of a partial index (``jobs_scheduled``, ``jobs_running``,
``tenants_limited``) that stops at the first row not yet due, so an idle maintenance pass costs
three index probes per queue.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence

from fairq.backends.sqlite.events import end_cancelled, fail_run, make_ready
from fairq.backends.sqlite.records import JobRow, QueueRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.cancel import CANCELLED_NOTE
from fairq.contract import ExpiredLease, MaintainParams, MaintainResult
from fairq.policy import slots
from fairq.policy.tenant import end_run, forgettable, refresh, retag

LEASE_EXPIRED_ERROR = "lease expired"


def maintain(db: sqlite3.Connection, params: MaintainParams) -> MaintainResult:
    """Maintain the queues asked; also forget throttle-window times no rule can count,
    tenant slots whose lease is over and unique keys whose window ended."""
    names = queue_names(db) if params.queues is None else list(params.queues)
    promoted, expired = maintain_queues(db, names, params.now)
    db.execute(Q["throttle_prune"], {"now": params.now})
    db.execute(Q["slots_prune"], {"now": params.now})
    db.execute(Q["waiters_prune"], {"before": params.now - slots.PARK_TTL})
    db.execute(Q["unique_prune"], {"now": params.now})
    pruned = 0
    if params.retention is not None:
        pruned = prune(db, params.now - params.retention, params.now)
        pruned += prune_results(db, params.now)
    return MaintainResult(
        promoted=promoted, expired=expired, pruned=pruned, next_due=next_due(db, names)
    )


def prune(db: sqlite3.Connection, before: float, now: float) -> int:
    """Delete old succeeded and cancelled jobs; a tenant whose last stored job goes is
    forgotten."""
    deleted = Counter(row["tenant_id"] for row in db.execute(Q["jobs_prune"], {"before": before}))
    deleted.update(row["tenant_id"] for row in db.execute(Q["cancelled_prune"], {"before": before}))
    return _unkeep(db, deleted, now)


def prune_results(db: sqlite3.Connection, now: float) -> int:
    """Delete the succeeded jobs whose kept result expired (fairq/results.py)."""
    deleted = Counter(row["tenant_id"] for row in db.execute(Q["results_prune"], {"now": now}))
    return _unkeep(db, deleted, now)


def _unkeep(db: sqlite3.Connection, deleted: Counter[int], now: float) -> int:
    for tenant_id, count in sorted(deleted.items()):
        tenant = TenantRow.load(db, tenant_id)
        tenant.kept -= count
        if forgettable(tenant, own_settings=tenant.own_settings(), now=now):
            db.execute(Q["tenant_delete"], {"id": tenant_id})
        else:
            tenant.save(db)
    return deleted.total()


def queue_names(db: sqlite3.Connection) -> list[str]:
    return [row["name"] for row in db.execute(Q["queue_names"])]


def maintain_queues(
    db: sqlite3.Connection, names: Sequence[str], now: float
) -> tuple[int, list[ExpiredLease]]:
    """Per queue: promote, then expire, then end rate limits that are over (queues share no
    state, so their order is free)."""
    promoted = 0
    expired: list[ExpiredLease] = []
    for name in names:
        queue = QueueRow.load(db, name)
        if queue is None:
            continue
        promoted += _promote(db, queue, now)
        expired += _expire(db, name, now)
        _unlimit(db, queue, now)
    return promoted, expired


def _promote(db: sqlite3.Connection, queue: QueueRow, now: float) -> int:
    """A due job is ready as of its run-at (promotion never moves V)."""
    due = [row["seq"] for row in db.execute(Q["jobs_due"], {"queue": queue.name, "now": now})]
    for seq in due:
        job = JobRow.by_seq(db, seq)
        tenant = TenantRow.load(db, job.tenant_id)
        tenant.scheduled -= 1
        make_ready(db, job, tenant, queue, now, job.run_at)
        tenant.save(db)
    return len(due)


def _expire(db: sqlite3.Connection, queue: str, now: float) -> list[ExpiredLease]:
    """An expired lease is a failed attempt, retried at once, charged what the run was
    charged so far (a crash is not consumption: no end-of-run correction), and no sample of
    its learned cost (its run time is unknown). An unclaimed one never ran (``_unclaimed``)."""
    overdue = [row["seq"] for row in db.execute(Q["jobs_expired"], {"queue": queue, "now": now})]
    expired: list[ExpiredLease] = []
    for seq in overdue:
        job = JobRow.by_seq(db, seq)
        deadline = job.deadline
        assert deadline is not None
        tenant = TenantRow.load(db, job.tenant_id)
        if job.claimed:
            fail_run(
                db, job, tenant, now=now, ended_at=None, error=LEASE_EXPIRED_ERROR, retry_at=now
            )
            expired.append(ExpiredLease.of(job, deadline))
        else:
            _unclaimed(db, job, tenant, now)
            expired.append(ExpiredLease.unclaimed(job, deadline))
    return expired


def _unclaimed(db: sqlite3.Connection, job: JobRow, tenant: TenantRow, now: float) -> None:
    """A relayed job's hold lapsed before a worker claimed it (its relay died or gave it
    back): it never ran, so the attempt is given back, no failure or figure is counted, its
    tenant's estimate is given back (a run of no length), and it is ready again at once
    (cancelled if it had a cancel request). Saves the job and the tenant."""
    queue = QueueRow.get(db, job.queue)
    end_run(queue, tenant, job, job.started_at, now)
    job.attempts -= 1
    if job.cancel_requested:
        job.last_error = CANCELLED_NOTE
        end_cancelled(db, job, tenant, now)
    else:
        make_ready(db, job, tenant, queue, now, now)
    retag(queue, tenant)
    tenant.save(db)


def _unlimit(db: sqlite3.Connection, queue: QueueRow, now: float) -> None:
    """Tenants whose rate limit is over come back, in (limited_until, tenant) order."""
    over = db.execute(Q["tenants_unlimit"], {"queue": queue.name, "now": now}).fetchall()
    for tenant_id in [row["id"] for row in over]:
        tenant = TenantRow.load(db, tenant_id)
        tenant.limited_until = None
        refresh(queue, tenant, now)
        tenant.save(db)


def next_due(db: sqlite3.Connection, names: Sequence[str]) -> float | None:
    """The earliest moment maintenance of ``names`` will have something to do."""
    due: list[float] = []
    for name in names:
        for query in ("next_run_at", "next_deadline", "next_limited"):
            found = db.execute(Q[query], {"queue": name}).fetchone()["due"]
            if found is not None:
                due.append(found)
    return min(due, default=None)
