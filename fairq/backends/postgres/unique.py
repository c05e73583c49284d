"""Unique keys at enqueue (fairq/policy/unique.py): ``unique_claim`` in functions/unique.sql,
called in the enqueue's transaction before its jobs are stored, and before the queue locks
the enqueue statement takes (functions/enqueue.sql): an enqueue that waits for a key holds no
queue lock, so maintenance never waits for it (and keys are taken before queue locks by every
enqueue, an enqueue in the caller's transaction takes none)."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import Row
from fairq.backends.postgres.steps import PgSteps, Sql, run
from fairq.job import NewJob
from fairq.policy.unique import Holder


def claim(
    cur: Cursor[Row], q: Queries, jobs: Sequence[NewJob], queues: Sequence[str], now: float
) -> dict[int, Holder]:
    return run(cur, claim_steps(q, jobs, queues, now))


def claim_steps(
    q: Queries, jobs: Sequence[NewJob], queues: Sequence[str], now: float
) -> PgSteps[dict[int, Holder]]:
    """The jobs whose key is held, by position; the others with a key take it. ``jobs`` as
    enqueued (a key's scope is the queue named there), ``queues`` where each goes."""
    picked = [i for i, job in enumerate(jobs) if job.unique is not None]
    if not picked:
        return {}
    keyed = [(jobs[i], jobs[i].unique) for i in picked]
    args = {
        "queues": [job.queue for job, _ in keyed],
        "tenants": [job.tenant for job, _ in keyed],
        "keys": [u.key for _, u in keyed if u is not None],
        "ids": [job.id for job, _ in keyed],
        "job_queues": [queues[i] for i in picked],
        "windows": [u.window for _, u in keyed if u is not None],
        "holds": [u.hold for _, u in keyed if u is not None],
        "now": now,
    }
    rows = yield Sql(q["unique_claim"], args)
    return {picked[row["pos"] - 1]: Holder(row["held_by"], queue=row["held_queue"]) for row in rows}


#: The most keys one maintenance pass deletes (the next pass deletes more).
PRUNE_LIMIT = 10_000


def prune(cur: Cursor[Row], q: Queries, now: float) -> int:
    """Delete keys whose window ended, up to ``PRUNE_LIMIT``; returns how many."""
    row = cur.execute(q["unique_prune"], {"now": now, "limit": PRUNE_LIMIT}).fetchone()
    return 0 if row is None else int(row["pruned"])
