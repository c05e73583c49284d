"""Heartbeats on PostgreSQL: extend held leases, charging each claimed run so far to its
tenant, and say which jobs have a cancel request (fairq/cancel.py). With ``claim``, a relayed
job's run starts; with ``hold``, the relay keeps the jobs no worker claimed yet
(``HeartbeatParams``).

Locks, in the order of queries/locks.sql: the jobs' queues (shared), the jobs in seq order, the
tenants of the runs charged in id order (a claim or a hold charges nothing, so it holds no
tenant a dispatch would have to skip); the event's time is read once all are held.
"""

from __future__ import annotations

from collections.abc import Callable

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.events import Events
from fairq.backends.postgres.keys import parse_token
from fairq.backends.postgres.records import JobRow, Lock, Row
from fairq.contract import HeartbeatParams, HeartbeatResult
from fairq.job import JobState


def heartbeat(
    cur: Cursor[Row],
    q: Queries,
    lock: Lock,
    event_time: Callable[[Cursor[Row], float], float],
    params: HeartbeatParams,
) -> HeartbeatResult:
    parsed = {token: parse_token(token) for token in params.tokens}
    ids = sorted({found[0] for found in parsed.values() if found is not None})
    named = cur.execute(q["jobs_queues"], {"ids": ids}).fetchall()
    lock(cur, [row["queue"] for row in named], params.now)
    rows = cur.execute(q["jobs_lock_by_ids"], {"ids": ids}).fetchall()
    jobs = {row["id"]: JobRow.from_row(row) for row in rows}
    held = {
        token: jobs[found[0]]
        for token, found in parsed.items()
        if found is not None and found[0] in jobs and jobs[found[0]].holds(found[1])
    }
    events = Events(cur, q)
    charged = {job.tenant_id for job in held.values() if job.claimed and params.hold is None}
    for tenant_id in sorted(charged):
        events.lock_tenant(tenant_id)
    now = event_time(cur, params.now)  # the rows are locked
    deadlines: dict[str, float] = {}
    lost: list[str] = []
    claimed: list[str] = []
    for token in params.tokens:
        job = held.get(token)
        if job is None or job.state is not JobState.RUNNING or job.overdue(now):
            lost.append(token)
        elif params.hold is not None:  # the relay keeps what no worker claimed yet
            if job.claimed:
                claimed.append(token)
            else:
                deadlines[token] = events.hold(job, now, params.hold)
        elif params.claim and job.claimed:  # a copy of a message whose job runs elsewhere
            claimed.append(token)
        elif params.claim:  # a relayed job's run starts now
            deadlines[token] = events.claim(job, now)
        else:
            deadlines[token] = events.heartbeat(job, now)
    cancelled = [token for token in deadlines if held[token].cancel_requested]
    return HeartbeatResult(deadlines=deadlines, lost=lost, cancelled=cancelled, claimed=claimed)
