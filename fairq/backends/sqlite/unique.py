"""Unique keys at enqueue (fairq/policy/unique.py), in the enqueue's write transaction: the
write lock is held from the first read, so of concurrent enqueues with one key exactly one
finds it free and takes it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from fairq.backends.sqlite.sql import Q
from fairq.job import NewJob
from fairq.policy.unique import PENDING_STATES, Holder, holders, is_held


def held(db: sqlite3.Connection, jobs: Sequence[NewJob], now: float) -> dict[int, Holder]:
    """The jobs of the batch whose key is held, by position (nothing is written)."""
    if not any(job.unique for job in jobs):
        return {}
    return holders(jobs, lambda job: _holder(db, job, now))


def _holder(db: sqlite3.Connection, job: NewJob, now: float) -> tuple[str, str] | None:
    assert job.unique is not None
    args = {"queue": job.queue, "tenant": job.tenant, "key": job.unique.key}
    row = db.execute(Q["unique_get"], args).fetchone()
    if row is None:
        return None
    pending = row["state"] in PENDING_STATES
    if is_held(row["expires_at"], bool(row["hold"]), pending, now):
        return str(row["job_id"]), str(row["job_queue"])
    return None


def take(db: sqlite3.Connection, jobs: Sequence[NewJob], queues: Sequence[str], now: float) -> None:
    """The stored jobs take their keys (``queues``: where each went)."""
    for job, queue in zip(jobs, queues, strict=True):
        if job.unique is None:
            continue
        db.execute(
            Q["unique_put"],
            {
                "queue": job.queue,
                "tenant": job.tenant,
                "key": job.unique.key,
                "job_id": job.id,
                "job_queue": queue,
                "expires_at": now + job.unique.window,
                "hold": int(job.unique.hold),
            },
        )
