"""Enqueue: many jobs in one transaction, with one tenant update per tenant touched."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from fairq.backends.sqlite import unique
from fairq.backends.sqlite.events import update_head
from fairq.backends.sqlite.records import QueueRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.backends.sqlite.throttling import route
from fairq.errors import ConfigError, DuplicateJob, FairqError
from fairq.job import JobState, NewJob, encode_headers
from fairq.policy.shards import MAX_OTHERS, least_loaded
from fairq.policy.tenant import refresh
from fairq.policy.unique import answer


def enqueue(
    db: sqlite3.Connection, jobs: Sequence[NewJob], now: float
) -> tuple[list[str], dict[int, str]]:
    """Store the jobs whose unique key is not held (fairq/policy/unique.py), all or none,
    and let them take their keys. Returns the queue each job went to (or, for a job whose key
    is held, the queue of the job holding it) and the ids of those holding jobs."""
    held = unique.held(db, jobs, now)
    kept = [job for i, job in enumerate(jobs) if i not in held]
    queues = _enqueue_all(db, kept, now) if kept else []
    unique.take(db, kept, queues, now)
    return answer(len(jobs), held, queues)


def _enqueue_all(db: sqlite3.Connection, given: Sequence[NewJob], now: float) -> list[str]:
    """Store all jobs, or none (a repeated id raises DuplicateJob and rolls everything back,
    throttle windows included). Returns the queue each job went to.

    Each job with throttle rules is first recorded in its window and routed, in order, as one
    enqueue after another would. Updating each tenant once for its whole batch then ends in
    the same state as one event per job: during an enqueue neither F nor V moves and adding
    ready work never ends eligibility, so ``refresh`` gives the same start tag whether it runs
    once or after every job (and the tenant is *returning* exactly when it had no ready job
    before the batch).

    Sharded jobs go one after another, so each job's choice of shard sees the jobs before it,
    as it would had each been enqueued alone.
    """
    if any(job.shards for job in given):
        _refuse_stored(db, given)
        return [_enqueue(db, [_to_shard(db, job)], now)[0] for job in given]
    return _enqueue(db, given, now)


def _refuse_stored(db: sqlite3.Connection, jobs: Sequence[NewJob]) -> None:
    seen: set[str] = set()
    bad: list[str] = []
    for job in jobs:
        if job.id in seen or db.execute(Q["job_by_id"], {"id": job.id}).fetchone() is not None:
            bad.append(job.id)
        seen.add(job.id)
    if bad:
        raise DuplicateJob(f"job ids already stored or repeated: {bad}")


def _to_shard(db: sqlite3.Connection, job: NewJob) -> NewJob:
    """The job in the least loaded of its shards (fairq.policy.shards.least_loaded)."""
    if not job.shards:
        return job
    loads = []
    for queue in job.shards:
        args = {"queue": queue, "tenant": job.tenant, "most": MAX_OTHERS}
        row = db.execute(Q["shard_load"], args).fetchone()
        loads.append((int(row["others"]), int(row["ready"])))
    return replace(job, queue=job.shards[least_loaded(loads)], shards=())


def _enqueue(db: sqlite3.Connection, given: Sequence[NewJob], now: float) -> list[str]:
    jobs = [replace(job, queue=route(db, job, now)) if job.throttle else job for job in given]
    tenant_ids = _tenant_ids(db, jobs)
    rows = [_job_row(job, tenant_ids[job.queue, job.tenant], now) for job in jobs]
    db.execute("SAVEPOINT enqueue_jobs")
    try:
        db.executemany(Q["job_insert"], rows)
    except sqlite3.IntegrityError as exc:
        db.execute("ROLLBACK TO enqueue_jobs")  # so the lookup sees only what was stored before
        raise _duplicates(db, jobs, exc) from exc
    db.execute("RELEASE enqueue_jobs")
    ready: Counter[int] = Counter()
    scheduled: Counter[int] = Counter()
    for job in jobs:
        counter = ready if job.run_at <= now else scheduled
        counter[tenant_ids[job.queue, job.tenant]] += 1
    queues = {name: QueueRow.get(db, name) for name in dict.fromkeys(job.queue for job in jobs)}
    for tenant_id in set(ready) | set(scheduled):
        _add_work(db, tenant_id, ready[tenant_id], scheduled[tenant_id], queues, now)
    return [job.queue for job in jobs]


def _tenant_ids(db: sqlite3.Connection, jobs: Sequence[NewJob]) -> dict[tuple[str, str], int]:
    for queue in dict.fromkeys(job.queue for job in jobs):
        db.execute(Q["queue_ensure"], {"name": queue})
    ids: dict[tuple[str, str], int] = {}
    for key in dict.fromkeys((job.queue, job.tenant) for job in jobs):
        ids[key] = tenant_id(db, *key)
    return ids


def tenant_id(db: sqlite3.Connection, queue: str, tenant: str) -> int:
    """The (queue, tenant) row's id, creating it with the queue's defaults if new."""
    params = {"queue": queue, "tenant": tenant}
    row = db.execute(Q["tenant_id"], params).fetchone()
    if row is None:
        db.execute(Q["tenant_ensure"], params)
        row = db.execute(Q["tenant_id"], params).fetchone()
    return int(row["id"])


def _job_row(job: NewJob, tenant_id: int, now: float) -> dict[str, object]:
    ready = job.run_at <= now
    return {
        "id": job.id,
        "tenant_id": tenant_id,
        "queue": job.queue,
        "name": job.name,
        "state": (JobState.READY if ready else JobState.SCHEDULED).value,
        "payload": job.payload,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "lease_timeout": job.lease_timeout,
        "cost": job.cost,
        "learn_cost": job.learn_cost,
        "enqueued_at": now,
        "run_at": job.run_at,
        "ready_at": now if ready else None,
        "headers": encode_headers(job.headers),
    }


def _add_work(
    db: sqlite3.Connection,
    tenant_id: int,
    ready: int,
    scheduled: int,
    queues: dict[str, QueueRow],
    now: float,
) -> None:
    tenant = TenantRow.load(db, tenant_id)
    tenant.scheduled += scheduled
    if ready:
        returning = tenant.ready == 0
        tenant.ready += ready
        update_head(db, tenant)
        refresh(queues[tenant.queue], tenant, now, returning=returning)
    tenant.save(db)


def _duplicates(
    db: sqlite3.Connection, jobs: Sequence[NewJob], cause: sqlite3.IntegrityError
) -> FairqError:
    """Name the offending ids (looked up only on this error path)."""
    seen: set[str] = set()
    bad: list[str] = []
    for job in jobs:
        stored = db.execute(Q["job_by_id"], {"id": job.id}).fetchone() is not None
        if job.id in seen or stored:
            bad.append(job.id)
        seen.add(job.id)
    if not bad:  # another constraint: a NaN time or cost arrives as NULL
        return ConfigError(f"the SQLite store refused a job: {cause}")
    return DuplicateJob(f"job ids already stored or repeated: {bad}")
