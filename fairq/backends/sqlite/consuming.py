"""Handing jobs out and taking them back: dispatch, ack (one or many), fail, release, heartbeat.

Each function runs inside the caller's write transaction and touches a constant number of
rows, each found through a primary key or the first entry of an index (and, once per call,
the learned cost of each (queue, job name) it dispatches or ends: costs.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from fairq.backends.sqlite import figures
from fairq.backends.sqlite.costs import Costs
from fairq.backends.sqlite.events import end_cancelled, fail_run, make_ready, update_head
from fairq.backends.sqlite.maintenance import maintain_queues
from fairq.backends.sqlite.records import JobRow, QueueRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.cancel import CANCELLED_NOTE
from fairq.contract import (
    AckManyResult,
    CheckpointParams,
    CheckpointResult,
    DequeueParams,
    DequeueResult,
    HeartbeatParams,
    HeartbeatResult,
    ReleaseParams,
)
from fairq.errors import LeaseExpired, LeaseNotFound
from fairq.job import JobInfo, JobState, Lease, held_leases
from fairq.policy.histogram import CANCELLED, SUCCEEDED
from fairq.policy.tenant import charge_progress, dispatch, end_run, retag
from fairq.results import JobResult

Rooms = dict[str, int]  # per capped queue: the jobs it may still hand out in this dequeue


def dispatch_first(
    db: sqlite3.Connection, params: DequeueParams, rooms: Rooms, costs: Costs
) -> Lease | None:
    """One single dequeue: the first queue, in the order given, with an eligible tenant and
    room under its ``max_in_flight``."""
    for name in params.queues:
        row = db.execute(Q["tenant_pick"], {"queue": name}).fetchone()
        if row is None:
            continue
        queue = QueueRow.get(db, name)
        if queue.max_in_flight is not None:
            if name not in rooms:
                rooms[name] = _room(db, name, queue.max_in_flight)
            if rooms[name] <= 0:
                continue  # full: the next queue asked is tried
            rooms[name] -= 1
        return _dispatch(db, queue, row["id"], params, costs)
    return None


def _room(db: sqlite3.Connection, queue: str, cap: int) -> int:
    """What a capped queue may still hand out: its cap less its leased jobs.

    Counted, not stored: under the write lock nothing else changes the count, an uncapped
    queue pays nothing (no counter to keep on every ack), and a count cannot drift from the
    jobs it counts. One range of the jobs_running index, at most ``cap`` entries, once per
    dequeue; the dequeue's own dispatches are then subtracted in memory.
    """
    return cap - int(db.execute(Q["queue_in_flight"], {"queue": queue, "cap": cap}).fetchone()[0])


def _dispatch(
    db: sqlite3.Connection, queue: QueueRow, tenant_id: int, params: DequeueParams, costs: Costs
) -> Lease:
    """Hand out the tenant's head job, charged its estimate; with ``hold`` (the relay's
    dequeue) unclaimed and leased for the hold, its run starting at a worker's claim."""
    now = params.now
    tenant = TenantRow.load(db, tenant_id)
    assert tenant.head_seq is not None
    job = JobRow.by_seq(db, tenant.head_seq)
    job.state = JobState.RUNNING
    job.attempts += 1
    job.leases += 1
    job.started_at = now
    job.claimed = params.hold is None
    job.deadline = now + (job.lease_timeout if params.hold is None else params.hold)
    job.worker_id = params.worker_id
    counts = figures.tally(db)
    if counts is not None and job.ready_at is not None:
        counts.waited(tenant_id, now - job.ready_at)
    dispatch(queue, tenant, job, costs.estimate(job), now)
    job.save(db)
    update_head(db, tenant)
    tenant.save(db)
    queue.save_vclock(db)
    return job.lease()


def held(db: sqlite3.Connection, token: str, now: float) -> JobRow:
    """The running job a token names, or LeaseNotFound / LeaseExpired."""
    job_id, _, lease_text = token.rpartition(":")
    job = JobRow.by_id(db, job_id)
    if job is None or job.state is not JobState.RUNNING or str(job.leases) != lease_text:
        raise LeaseNotFound.of(token)
    assert job.deadline is not None
    if now >= job.deadline:
        raise LeaseExpired.of(token, job.deadline, now)
    return job


def ack_many(
    db: sqlite3.Connection,
    tokens: Sequence[str],
    now: float,
    results: Mapping[str, JobResult] | None = None,
    costs: Costs | None = None,
) -> AckManyResult:
    """Single acks in order, in the caller's one transaction; lost tokens change nothing.
    ``results``: the values to keep, by token (fairq/results.py); ``costs``: the call's
    learned costs, when a dispatch follows in the same call."""
    acked: list[str] = []
    lost: list[str] = []
    learned = Costs(db) if costs is None else costs
    for token, job in held_leases(tokens, lambda t: held(db, t, now), lost):
        _ack(db, job, now, learned)
        if results and (result := results.get(token)) is not None:
            args = {"seq": job.seq, "result": result.value, "result_until": now + result.keep}
            db.execute(Q["job_keep_result"], args)
        acked.append(token)
    return AckManyResult(acked=acked, lost=lost)


def _ack(db: sqlite3.Connection, job: JobRow, now: float, costs: Costs) -> None:
    counts = figures.tally(db)
    if counts is not None and job.started_at is not None:
        counts.ended(job.tenant_id, SUCCEEDED, now - job.started_at)
    costs.learn(job, now)
    tenant = TenantRow.load(db, job.tenant_id)
    queue = QueueRow.get(db, job.queue)
    end_run(queue, tenant, job, now, now)
    tenant.succeeded += 1
    tenant.kept += 1
    job.state = JobState.SUCCEEDED
    job.finished_at = now
    job.save(db)
    retag(queue, tenant)
    tenant.save(db)


def fail(
    db: sqlite3.Connection, token: str, now: float, error: str, retry_at: float | None
) -> JobInfo:
    job = held(db, token, now)
    Costs(db).learn(job, now)  # a reported failure's run time is known: a sample
    tenant = TenantRow.load(db, job.tenant_id)
    fail_run(db, job, tenant, now=now, ended_at=now, error=error, retry_at=retry_at)
    return job.info()


def release(db: sqlite3.Connection, params: ReleaseParams) -> None:
    now = params.now
    job = held(db, params.token, now)
    tenant = TenantRow.load(db, job.tenant_id)
    queue = QueueRow.get(db, job.queue)
    end_run(queue, tenant, job, now, now)
    job.attempts -= 1
    if params.note is not None:
        job.last_error = params.note
    if job.cancel_requested:  # handed back after a cancel request: it ends here
        job.last_error = params.note or CANCELLED_NOTE
        counts = figures.tally(db)
        if counts is not None and job.started_at is not None:
            counts.ended(job.tenant_id, CANCELLED, now - job.started_at)
        end_cancelled(db, job, tenant, now)
    elif params.run_at is None or params.run_at <= now:
        make_ready(db, job, tenant, queue, now, now)
    else:
        job.state = JobState.SCHEDULED
        job.run_at = params.run_at
        tenant.scheduled += 1
        job.save(db)
    retag(queue, tenant)
    tenant.save(db)


def heartbeat(db: sqlite3.Connection, params: HeartbeatParams) -> HeartbeatResult:
    """Charge each claimed run its time so far, then extend its lease; report those with a
    cancel request. ``claim`` starts an unclaimed run; ``hold`` renews an unclaimed lease for
    the hold (the relay's, DequeueParams.hold). Both leave a claimed lease alone, reporting
    it."""
    now = params.now
    deadlines: dict[str, float] = {}
    lost: list[str] = []
    cancelled: list[str] = []
    claimed: list[str] = []
    for token, job in held_leases(params.tokens, lambda t: held(db, t, now), lost):
        if (params.hold is not None or params.claim) and job.claimed:
            claimed.append(token)  # a worker has it; or a copy of a message whose job runs
            continue
        if params.hold is not None:
            deadline = now + params.hold
        elif params.claim:  # a relayed job's run starts now
            job.claimed = True
            job.started_at = now
            deadline = now + job.lease_timeout
        else:
            deadline = _beat(db, job, now)
        job.deadline = deadline
        job.save(db)
        deadlines[token] = deadline
        if job.cancel_requested:
            cancelled.append(token)
    return HeartbeatResult(deadlines=deadlines, lost=lost, cancelled=cancelled, claimed=claimed)


def _beat(db: sqlite3.Connection, job: JobRow, now: float) -> float:
    """A plain heartbeat: a claimed run is charged its time so far (an unclaimed one's wait
    in a broker is no service). Returns its new deadline, its own lease from now; the caller
    sets it and saves the job."""
    if job.claimed:
        tenant = TenantRow.load(db, job.tenant_id)
        charge_progress(QueueRow.get(db, job.queue), tenant, job, now)
        tenant.save(db)
    return now + job.lease_timeout


def checkpoint(db: sqlite3.Connection, params: CheckpointParams) -> CheckpointResult:
    """A heartbeat of one lease that also stores its job's progress; raises if not held."""
    job = held(db, params.token, params.now)
    job.deadline = deadline = _beat(db, job, params.now)
    job.save(db)
    db.execute(Q["job_checkpoint"], {"seq": job.seq, "progress": params.progress})
    return CheckpointResult(deadline=deadline)


def dequeue(
    db: sqlite3.Connection, params: DequeueParams, costs: Costs | None = None
) -> DequeueResult:
    """Maintain the queues asked, then up to ``limit`` single dispatches at the same ``now``.

    Maintenance runs once: a dispatch at ``now`` creates nothing due at ``now`` (leases end
    later), so repeating it before each dispatch would find nothing. ``costs``: the call's
    learned costs (after its acks, in an ack and dequeue).
    """
    _, expired = maintain_queues(db, params.queues, params.now)
    taken: list[Lease] = []
    rooms: Rooms = {}
    learned = Costs(db) if costs is None else costs
    while len(taken) < params.limit:
        lease = dispatch_first(db, params, rooms, learned)
        if lease is None:
            break
        taken.append(lease)
    return DequeueResult(leases=taken, expired=expired)
