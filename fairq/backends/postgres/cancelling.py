"""Cancels on PostgreSQL (fairq/cancel.py), in one transaction, in Python on locked rows (as
requeue: an operator's call, not a hot path), through the same transitions as every event.

Locks, in the order of queries/locks.sql: the queues of the jobs named, exclusive (as maintenance:
dispatches and enqueues run under the shared lock, take tenant rows without waiting and take
a tenant's inbox rows in while they hold it, so only the exclusive lock keeps them all out
while a cancel locks job rows, then tenants, and takes rows out of the inbox: no cycle of
waits, and a job cancelled in the inbox is never taken in), then the inbox rows and the job
rows (seq order), then their tenants (id order). A job still in the inbox (its
caller's transaction committed, no worker has taken it in yet) was never counted in its
tenant: it is taken out and stored cancelled. A job found nowhere under those locks is
unknown, or finished when succeeded_jobs holds it.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.events import Events
from fairq.backends.postgres.records import JobRow, Lock, Row, TenantRow
from fairq.cancel import CANCELLED_NOTE, CancelOutcome, outcome_for
from fairq.job import JobState
from fairq.policy import tenant as transitions


def cancel(
    cur: Cursor[Row], q: Queries, lock: Lock, ids: Sequence[str], now: float
) -> list[CancelOutcome]:
    """The outcome of each id, in order (no worker needs waking: a cancel only takes work
    away)."""
    queues = [row["queue"] for row in cur.execute(q["cancel_queues"], {"ids": list(ids)})]
    if not queues:
        return _outcomes(cur, q, ids, {}, {})
    now = lock(cur, queues, now)
    events = Events(cur, q)
    inbox = cur.execute(q["inbox_cancel"], {"ids": list(ids)}).fetchall()
    rows = cur.execute(q["jobs_lock_by_ids"], {"ids": list(ids)}).fetchall()
    jobs = {row["id"]: JobRow.from_row(row) for row in rows if row["queue"] in queues}
    pairs = [(row["queue"], row["tenant"]) for row in inbox]
    pairs += [(job.queue, job.tenant) for job in jobs.values() if _waiting(job)]
    for name in sorted({queue for queue, _ in pairs}):
        cur.execute(q["queue_ensure"], {"name": name})  # an inbox-only queue has no row yet
    tenants = events.lock_tenants(pairs)
    done: dict[str, CancelOutcome] = {}
    for row in inbox:
        _store_cancelled_inbox(cur, q, row, tenants[(row["queue"], row["tenant"])].id, now)
        done[row["id"]] = CancelOutcome.CANCELLED
    for job in jobs.values():
        outcome = outcome_for(job.state)
        if outcome is CancelOutcome.REQUESTED:
            cur.execute(q["job_request_cancel"], {"seq": job.seq, "now": now})
        elif outcome is CancelOutcome.CANCELLED:
            _cancel_waiting(events, job, tenants[(job.queue, job.tenant)], now)
        else:
            continue  # finished: told apart from unknown by `_outcomes`
        done[job.id] = outcome
    return _outcomes(cur, q, ids, jobs, done)


def _waiting(job: JobRow) -> bool:
    return outcome_for(job.state) is CancelOutcome.CANCELLED


def _cancel_waiting(events: Events, job: JobRow, tenant: TenantRow, now: float) -> None:
    """Out of its tenant's FIFO (or its schedule), stored cancelled; an emptied tenant leaves
    the eligible index, as after a dispatch."""
    if job.state is JobState.READY:
        tenant.ready -= 1
    else:
        tenant.scheduled -= 1
    job.last_error = CANCELLED_NOTE
    events.finish_cancelled(job, tenant, now)
    transitions.refresh(events.queue(tenant.queue), tenant, now)
    events.save(None, tenant)


def _store_cancelled_inbox(
    cur: Cursor[Row], q: Queries, row: Row, tenant_id: int, now: float
) -> None:
    args = {**row, "tenant_id": tenant_id, "finished_at": now, "last_error": CANCELLED_NOTE}
    cur.execute(q["inbox_job_cancelled"], args)
    cur.execute(q["tenant_count_cancelled"], {"id": tenant_id, "n": 1})


def _outcomes(
    cur: Cursor[Row],
    q: Queries,
    ids: Sequence[str],
    jobs: dict[str, JobRow],
    done: dict[str, CancelOutcome],
) -> list[CancelOutcome]:
    """Each id's outcome: what this call did (a job cancelled here is finished for the same id
    asked again), else finished when it is dead or in succeeded_jobs, else unknown."""
    rows = cur.execute(q["succeeded_ids"], {"ids": list(ids)}).fetchall()
    finished = {row["id"] for row in rows}
    finished |= {job.id for job in jobs.values() if job.state is JobState.DEAD}
    outcomes = []
    for job_id in ids:
        found = done.get(job_id)
        if found is CancelOutcome.CANCELLED:
            del done[job_id]
        elif found is None:
            found = CancelOutcome.FINISHED if job_id in finished else CancelOutcome.UNKNOWN
        outcomes.append(found)
    return outcomes
