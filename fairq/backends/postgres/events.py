"""The scheduling rules applied to rows inside one transaction (docs/internals/scheduler.md).

``Events`` is made per transaction, after the queue locks are held. It mirrors the reference
model step for step: the transitions are ``fairq.policy.tenant``, the functions the model
applies, so every tag it writes is the double the model would compute. It caches the rows it
has loaded or locked; every change is written back before the next statement that reads it
(``save``), so the database and the cache never disagree inside the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import JobRow, QueueRow, Row, TenantRow, tenant_key
from fairq.backends.postgres.steps import PgSteps, Sql, first, run
from fairq.cancel import CANCELLED_NOTE
from fairq.contract import ExpiredLease, ReleaseParams
from fairq.figures import Tally
from fairq.job import JobState
from fairq.policy import fairness
from fairq.policy import tenant as transitions
from fairq.policy.histogram import CANCELLED, EXPIRED, FAILED

LEASE_EXPIRED_ERROR = "lease expired"


class Events:
    """The rules, over rows of one transaction. Callers hold the queue locks the event needs."""

    def __init__(self, cur: Cursor[Row] | None, q: Queries) -> None:
        """``cur``: the transaction's cursor; None for an Events used only through its
        ``*_steps`` methods (fairq.backends.postgres.steps), whose driver holds the cursor."""
        self._cur = cur
        self.q = q
        self.tenants: dict[int, TenantRow] = {}
        self.queues: dict[str, QueueRow] = {}
        self.woken: set[str] = set()  # queues that got work a waiting worker could take
        self.figures: Tally[int] = Tally()  # runs failed or expired here (figures.write)

    @property
    def cur(self) -> Cursor[Row]:
        assert self._cur is not None, "an Events without a cursor runs only as steps"
        return self._cur

    # -- loading -------------------------------------------------------------------------------

    def queue(self, name: str) -> QueueRow:
        if name in self.queues:  # the common case, without making an operation of it
            return self.queues[name]
        return run(self.cur, self.queue_steps(name))

    def queue_steps(self, name: str) -> PgSteps[QueueRow]:
        """V and the history settings of a queue (read once per transaction: the caller's
        queue lock keeps them from changing under it)."""
        if name not in self.queues:
            row = first((yield Sql(self.q["queue_get"], {"name": name})))
            self.queues[name] = (
                QueueRow(vclock=0.0, half_life=None, max_debt=60.0)
                if row is None
                else QueueRow.from_row(row)
            )
        return self.queues[name]

    def lock_tenants(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], TenantRow]:
        return run(self.cur, self.lock_tenants_steps(pairs))

    def lock_tenants_steps(
        self, pairs: list[tuple[str, str]]
    ) -> PgSteps[dict[tuple[str, str], TenantRow]]:
        """Create missing (queue, tenant) rows, then lock them all in id order.

        A row that a concurrent prune forgot (deleted) between the two statements is not
        locked: it is created again, so the caller always gets every pair."""
        found: dict[tuple[str, str], TenantRow] = {}
        missing = sorted(set(pairs))
        while missing:
            args = {
                "queues": [queue for queue, _ in missing],
                "tenants": [tenant for _, tenant in missing],
                "keys": [tenant_key(tenant) for _, tenant in missing],
            }
            yield Sql(self.q["tenants_ensure"], args)
            for row in (yield Sql(self.q["tenants_lock"], args)):
                tenant = self.tenants.setdefault(row["id"], TenantRow.from_row(row))
                found[(tenant.queue, tenant.tenant)] = tenant
            missing = [pair for pair in missing if pair not in found]
        return found

    def lock_tenant(self, tenant_id: int) -> TenantRow:
        """The tenant of a stored job: never forgotten while the job is stored."""
        tenant = self.find_tenant(tenant_id)
        assert tenant is not None, f"job names tenant row {tenant_id}, which is missing"
        return tenant

    def find_tenant(self, tenant_id: int) -> TenantRow | None:
        """Lock a tenant row read earlier; None if a concurrent prune forgot it meanwhile."""
        if tenant_id not in self.tenants:
            row = self.cur.execute(self.q["tenant_lock_by_id"], {"id": tenant_id}).fetchone()
            if row is None:
                return None
            self.tenants[tenant_id] = TenantRow.from_row(row)
        return self.tenants[tenant_id]

    def save(self, job: JobRow | None, tenant: TenantRow) -> None:
        run(self.cur, self.save_steps(job, tenant))

    def save_steps(self, job: JobRow | None, tenant: TenantRow) -> PgSteps[None]:
        """Job first: the tenant's head is re-read from jobs when the tenant row is written."""
        if job is not None:
            yield from job.save_steps(self.q)
        yield from tenant.save_steps(self.q)

    # -- ending runs (dispatch and ack run server-side: functions/*.sql) ----------------

    def release(self, job: JobRow, params: ReleaseParams) -> None:
        now = params.now
        tenant = self.end_run(job, now, now)
        job.attempts -= 1
        if params.note is not None:
            job.last_error = params.note
        if job.cancel_requested:  # handed back after a cancel request: it ends here
            assert job.started_at is not None
            self.figures.ended(job.tenant_id, CANCELLED, now - job.started_at)
            job.last_error = params.note or CANCELLED_NOTE
            self.finish_cancelled(job, tenant, now)
            transitions.retag(self.queue(tenant.queue), tenant)
            self.save(None, tenant)
            return
        if params.run_at is None or params.run_at <= now:
            self.make_ready(tenant, job, now, now)
        else:
            job.state = JobState.SCHEDULED
            job.run_at = params.run_at
            tenant.scheduled += 1
        transitions.retag(self.queue(tenant.queue), tenant)
        self.save(job, tenant)

    def fail(self, job: JobRow, now: float, error: str, retry_at: float | None) -> None:
        assert job.started_at is not None
        outcome = CANCELLED if job.cancel_requested else FAILED
        self.figures.ended(job.tenant_id, outcome, now - job.started_at)
        tenant = self.end_run(job, now, now)
        self.learn(job, now)
        self._failed(job, tenant, now, error, retry_at, stopped=True)

    def learn(self, job: JobRow, ended_at: float) -> None:
        """A claimed run's charge is a sample of its (queue, name)'s learned cost, folded as
        an ack's (functions/costs.sql: learn_costs, after its tenant is held)."""
        assert job.started_at is not None
        if job.claimed:
            sample = fairness.run_charge(job.started_at, ended_at)
            args = {"queues": [job.queue], "names": [job.name], "samples": [sample]}
            self.cur.execute(self.q["job_costs_learn"], args)

    def _failed(
        self,
        job: JobRow,
        tenant: TenantRow,
        now: float,
        error: str,
        retry_at: float | None,
        *,
        stopped: bool = False,
    ) -> None:
        """A failed run, its slot freed: dead, ready again, or scheduled for its retry; a job
        with a cancel request ends cancelled (its worker ``stopped`` it: no failure then)."""
        tenant.failed += not (stopped and job.cancel_requested)
        job.last_error = error
        if job.cancel_requested:
            self.finish_cancelled(job, tenant, now)
            transitions.retag(self.queue(tenant.queue), tenant)
            self.save(None, tenant)
            return
        if retry_at is None or job.attempts >= job.max_attempts:
            job.state = JobState.DEAD
            job.finished_at = now
            tenant.dead += 1
        elif retry_at <= now:
            self.make_ready(tenant, job, now, now)
        else:
            job.state = JobState.SCHEDULED
            job.run_at = retry_at
            tenant.scheduled += 1
        transitions.retag(self.queue(tenant.queue), tenant)
        self.save(job, tenant)

    def finish_cancelled(self, job: JobRow, tenant: TenantRow, now: float) -> None:
        """A job neither queued nor running any more ends cancelled: it moves to
        succeeded_jobs (kept until the retention prunes it) and its tenant counts it. The
        caller saves the tenant (whose head is read again without it)."""
        job.state = JobState.CANCELLED
        job.finished_at = now
        args = {
            "seq": job.seq,
            "attempts": job.attempts,
            "started_at": job.started_at,
            "finished_at": now,
            "last_error": job.last_error,
        }
        self.cur.execute(self.q["job_finish_cancelled"], args)
        self.cur.execute(self.q["tenant_count_cancelled"], {"id": tenant.id, "n": 1})

    def end_run(self, job: JobRow, ended_at: float | None, now: float) -> TenantRow:
        """Charge the run's real cost in place of what it was charged and free its slot
        (``ended_at=None``: its end is unknown; it stays charged what it was so far)."""
        tenant = self.lock_tenant(job.tenant_id)
        queue = self.queue(tenant.queue)
        was_eligible = transitions.eligible(queue, tenant)
        transitions.end_run(queue, tenant, job, ended_at, now)
        if not was_eligible:
            self.woken.add(tenant.queue)  # a freed slot may let this tenant run again
        if queue.max_in_flight is not None:
            self._end_in_flight(tenant.queue)
        return tenant

    def _end_in_flight(self, name: str) -> None:
        """A lease of a capped queue ended: one fewer in flight (the row is written only for
        a capped queue); waiters are woken when that takes the queue from full to not full."""
        row = self.cur.execute(self.q["queue_end_runs"], {"name": name, "ended": 1}).fetchone()
        if row is not None and row["in_flight"] + 1 == row["max_in_flight"]:
            self.woken.add(name)

    # -- running ---------------------------------------------------------------------------------

    def heartbeat(self, job: JobRow, now: float) -> float:
        """Charge the time a claimed run ran beyond what it was charged; extend its lease (an
        unclaimed job's wait in a broker is charged nothing)."""
        job.deadline = now + job.lease_timeout
        if not job.claimed:
            job.save(self.cur, self.q)
            return job.deadline
        tenant = self.lock_tenant(job.tenant_id)
        transitions.charge_progress(self.queue(tenant.queue), tenant, job, now)
        self.save(job, tenant)
        return job.deadline

    def claim(self, job: JobRow, now: float) -> float:
        """A peer's worker takes a relayed job: its run starts now, under its own lease,
        charged its estimate so far."""
        job.claimed = True
        job.started_at = now
        job.deadline = now + job.lease_timeout
        job.save(self.cur, self.q)
        return job.deadline

    def hold(self, job: JobRow, now: float, hold: float) -> float:
        """The relay keeps an unclaimed job it published, until ``now + hold``; no charge."""
        job.deadline = now + hold
        job.save(self.cur, self.q)
        return job.deadline

    # -- maintenance -----------------------------------------------------------------------------

    def promote(self, job: JobRow, now: float) -> None:
        tenant = self.lock_tenant(job.tenant_id)
        tenant.scheduled -= 1
        self.make_ready(tenant, job, now, job.run_at)
        self.save(job, tenant)

    def expire(self, job: JobRow, now: float) -> ExpiredLease:
        """A crash is not consumption: as fail, except that the run stays charged exactly what
        it was (the estimate at dispatch, raised by each heartbeat), so F and usage do not
        change; charging the whole lease would freeze the tenant for as long as the lease."""
        deadline = job.deadline
        assert deadline is not None
        if not job.claimed:
            self._unclaimed(job, now)
            return ExpiredLease.unclaimed(job, deadline)
        self.figures.ended(job.tenant_id, EXPIRED, None)
        self._failed(job, self.end_run(job, None, now), now, LEASE_EXPIRED_ERROR, now)
        return ExpiredLease.of(job, deadline)

    def _unclaimed(self, job: JobRow, now: float) -> None:
        """A relayed job's hold lapsed before a worker claimed it (its relay died or gave it
        back): it never ran, so it is ready again with the attempt given back, counted as no
        failure and no figure, its estimate given back: a run of no length (or it ends
        cancelled)."""
        tenant = self.end_run(job, job.started_at, now)
        job.attempts -= 1
        if job.cancel_requested:
            job.last_error = CANCELLED_NOTE
            self.finish_cancelled(job, tenant, now)
            transitions.retag(self.queue(tenant.queue), tenant)
            self.save(None, tenant)
            return
        self.make_ready(tenant, job, now, now)
        transitions.retag(self.queue(tenant.queue), tenant)
        self.save(job, tenant)

    def requeue_dead(self, ids: Sequence[str], now: float) -> int:
        """Requeue those of ``ids`` that are dead (locking each); how many were."""
        count = 0
        for job_id in ids:
            row = self.cur.execute(self.q["job_lock_by_id"], {"id": job_id}).fetchone()
            if row is not None and row["state"] == JobState.DEAD.value:
                self.requeue(JobRow.from_row(row), now)
                count += 1
        return count

    def requeue(self, job: JobRow, now: float) -> None:
        tenant = self.lock_tenant(job.tenant_id)
        tenant.dead -= 1
        job.attempts = 0
        job.finished_at = None
        self.make_ready(tenant, job, now, now)
        self.save(job, tenant)

    def unlimit(self, tenant: TenantRow, now: float) -> None:
        """The tenant's rate limit is over: back into the eligible index if it has work."""
        tenant.limited_until = None
        self.settle(tenant, now)

    # -- settings --------------------------------------------------------------------------------

    def resettle(self, tenant: TenantRow, now: float) -> None:
        run(self.cur, self.resettle_steps(tenant, now))

    def resettle_steps(self, tenant: TenantRow, now: float) -> PgSteps[None]:
        """Settings changed (the caller set the effective ones): recompute the rate hold, then
        eligibility."""
        transitions.limit_until((yield from self.queue_steps(tenant.queue)), tenant, now)
        yield from self.settle_steps(tenant, now)

    # -- shared steps ----------------------------------------------------------------------------

    def settle(self, tenant: TenantRow, now: float) -> None:
        run(self.cur, self.settle_steps(tenant, now))

    def settle_steps(self, tenant: TenantRow, now: float) -> PgSteps[None]:
        queue = yield from self.queue_steps(tenant.queue)
        was_eligible = transitions.eligible(queue, tenant)
        transitions.refresh(queue, tenant, now)
        if transitions.eligible(queue, tenant) and not was_eligible:
            self.woken.add(tenant.queue)
        yield from self.save_steps(None, tenant)

    def make_ready(self, tenant: TenantRow, job: JobRow, now: float, ready_at: float) -> None:
        returning = tenant.ready == 0
        job.state = JobState.READY
        job.ready_at = ready_at
        tenant.ready += 1
        transitions.refresh(self.queue(tenant.queue), tenant, now, returning=returning)
        self.woken.add(tenant.queue)
