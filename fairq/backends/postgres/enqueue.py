"""Enqueue on PostgreSQL: one statement for every caller (functions/enqueue.sql says what it
does, and where the checks at enqueue belong).

The statement's arguments are built by ``arguments`` and its reply read by ``queues_of``, both
pure, so a caller on any connection (this backend's pool, the application's connection in
``enqueue_in``, an async connection) sends the very same statement, ``queries["enqueue"]``,
with the same arguments and reads its answer the same way. A refused id comes back as
``UniqueViolation``: ``refused`` turns it into ``DuplicateJob``.

Jobs with throttle rules or shards (``routed_first``) choose their queue first, in the same
transaction (throttling.route, sharding.place: windows to record, loads to read); the others
need nothing more than the one statement, in one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from fairq.backends.postgres.keys import channel_salt, schema_seed
from fairq.backends.postgres.records import Row, tenant_key
from fairq.errors import DuplicateJob
from fairq.job import NewJob, encode_headers


def routed_first(jobs: Sequence[NewJob]) -> bool:
    """Whether some job must choose its queue before the statement (throttle rules, shards)."""
    return any(job.throttle or job.shards for job in jobs)


def arguments(
    jobs: Sequence[NewJob], now: float, *, schema: str, inbox: bool = False
) -> dict[str, Any]:
    """The statement's arguments: one array per field, in the jobs' order. ``inbox``: put every
    job in the inbox (an enqueue inside the caller's transaction, which takes no lock)."""
    return {
        "ids": [job.id for job in jobs],
        "names": [job.name for job in jobs],
        "queues": [job.queue for job in jobs],
        "tenants": [job.tenant for job in jobs],
        "keys": [tenant_key(job.tenant) for job in jobs],
        "payloads": [job.payload for job in jobs],
        "priorities": [job.priority for job in jobs],
        "run_ats": [float(job.run_at) for job in jobs],
        "max_attempts": [job.max_attempts for job in jobs],
        "lease_timeouts": [float(job.lease_timeout) for job in jobs],
        "costs": [float(job.cost) for job in jobs],
        "headers": [encode_headers(job.headers) for job in jobs],
        "now": float(now),
        "seed": schema_seed(schema),
        "salt": channel_salt(schema),
        "inbox": inbox,
    }


def queues_of(rows: Sequence[Row]) -> list[str]:
    """The statement's reply: the queue each job went to, in order."""
    (row,) = rows
    return list(row["queues"])


def refused(exc: psycopg.errors.UniqueViolation, *, usable: bool = False) -> DuplicateJob:
    """The error of an enqueue whose id is already stored; nothing of the batch was stored.
    ``usable``: the enqueue ran in the caller's transaction, which it left usable."""
    detail = exc.diag.message_detail or str(exc).strip()
    tail = " (your transaction is still usable)" if usable else ""
    return DuplicateJob(
        f"a job id is already stored ({detail}); nothing of the batch was stored{tail}. Give "
        "each job its own id, or leave the id out to get a new one."
    )
