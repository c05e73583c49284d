"""The reference model: the scheduling rules (docs/internals/scheduler.md) as plain Python.

No I/O and no clock: every call carries ``now``. It is the executable spec: the conformance
suite runs the same scenarios against it and against every store, and the simulator drives it
directly. It also serves ``memory://`` for single-process use (tests, notebooks).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from fairq.cancel import CANCELLED_NOTE
from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    AcquireSlotParams,
    CheckpointParams,
    CheckpointResult,
    DequeueParams,
    DequeueResult,
    EnqueueParams,
    EnqueueResult,
    ExpiredLease,
    FailParams,
    FiguresParams,
    GetQueueParams,
    HeartbeatParams,
    HeartbeatResult,
    Keep,
    LeaveLineParams,
    MaintainParams,
    MaintainResult,
    PublishJobTypesParams,
    ReleaseParams,
    ReleaseSlotsParams,
    ReleaseSlotsResult,
    RenewSlotsParams,
    RenewSlotsResult,
    RequeueParams,
    RouteParams,
    RouteResult,
    SetQueueParams,
    SlotResult,
    TenantFigures,
    TenantSettingsParams,
    TenantStats,
    WaitParams,
    no_wait,
    waited_first,
)
from fairq.errors import DuplicateJob, LeaseExpired, LeaseNotFound
from fairq.job import JobInfo, JobState, Lease, NewJob, encode_headers, held_leases
from fairq.model import rules
from fairq.model.cancels import Cancels
from fairq.model.figures import FigureTable
from fairq.model.slots import SlotTable
from fairq.model.state import Job, Queue, Tenant
from fairq.model.unique import UniqueTable
from fairq.policy import shards, throttle, unique
from fairq.policy.histogram import CANCELLED, EXPIRED, FAILED, SUCCEEDED

LEASE_EXPIRED_ERROR = "lease expired"


class ReferenceModel(Cancels):
    """An in-memory store that follows the rules to the letter. Thread-safe; one process."""

    def __init__(self) -> None:
        super().__init__()
        self._seq = 0
        self._slots = SlotTable()
        self._figures = FigureTable()
        self._unique = UniqueTable()

    @classmethod
    def from_url(cls, url: str) -> ReferenceModel:
        return cls()

    # -- producing -------------------------------------------------------------------------

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        """Jobs whose unique key is held are left out (fairq/policy/unique.py); the others
        are stored, all or none, and take their keys."""
        with self._changed:
            jobs = params.jobs
            if len({j.id for j in jobs}) != len(jobs):
                raise DuplicateJob(f"job ids repeated in one batch: {[j.id for j in jobs]}")
            held = unique.holders(
                jobs, lambda job: self._unique.holder(job, params.now, self._state)
            )
            stored = [job for i, job in enumerate(jobs) if i not in held]
            duplicate = [j.id for j in stored if j.id in self._jobs]
            if duplicate:
                raise DuplicateJob(f"job ids already stored or repeated: {duplicate}")
            queues = [self._store(new, params.now) for new in stored]
            for job, queue in zip(stored, queues, strict=True):
                self._unique.take(job, queue, params.now)
            self._changed.notify_all()
            chosen, existing = unique.answer(len(jobs), held, queues)
            return EnqueueResult(queues=chosen, existing=existing)

    def _state(self, job_id: str) -> JobState | None:
        job = self._jobs.get(job_id)
        return None if job is None else job.state

    def _store(self, new: NewJob, now: float) -> str:
        self._seq += 1
        job = Job(
            seq=self._seq,
            id=new.id,
            name=new.name,
            queue=self._route(new, now),
            tenant=new.tenant,
            payload=new.payload,
            priority=new.priority,
            state=JobState.SCHEDULED,
            enqueued_at=now,
            run_at=new.run_at,
            ready_at=None,
            max_attempts=new.max_attempts,
            lease_timeout=new.lease_timeout,
            cost=new.cost,
            learn_cost=new.learn_cost,
            headers=encode_headers(new.headers),
        )
        self._jobs[job.id] = job
        self._by_seq[job.seq] = job
        queue = self._queue(job.queue)
        tenant = queue.tenant(job.tenant)
        if job.run_at <= now:
            self._make_ready(queue, tenant, job, now, now)
        else:
            tenant.scheduled += 1
            heapq.heappush(queue.scheduled, (job.run_at, job.seq))
        return job.queue

    def _route(self, new: NewJob, now: float) -> str:
        if new.shards:
            return new.shards[shards.least_loaded([self._load(q, new.tenant) for q in new.shards])]
        return self._count(throttle.Routing(new.name, new.tenant, new.queue, new.throttle), now)

    def _load(self, name: str, tenant: str) -> tuple[int, int]:
        """A shard's load as ``shards.least_loaded`` weighs it: the other eligible tenants,
        the tenant's own ready jobs."""
        queue = self._queues.get(name)
        if queue is None:
            return (0, 0)
        own = queue.tenants.get(tenant)
        others = sum(1 for t in queue.tenants.values() if t.start is not None and t is not own)
        return (others, own.ready if own is not None else 0)

    def _count(self, routing: throttle.Routing, now: float) -> str:
        """Record the enqueue in its throttle window, then let the rules pick the queue."""
        if not routing.rules:
            return routing.home
        key = (routing.name, routing.tenant)
        span = throttle.window_span(routing.rules)
        old, old_span = self._windows.get(key, ([], 0.0))
        if old and max(old) < now - old_span:
            old = []  # a window idle for longer than its span is forgotten (expired)
        kept = [t for t in old if t >= now - span]
        times = [*kept, now][-throttle.window_size(routing.rules) :]
        self._windows[key] = (times, span)
        return throttle.choose_queue(times, now, routing.rules, routing.home)

    def route(self, params: RouteParams) -> RouteResult:
        routing = throttle.Routing(params.name, params.tenant, params.queue, params.rules)
        with self._changed:
            return RouteResult(queue=self._count(routing, params.now))

    # -- tenant slots (fairq/policy/slots.py) --------------------------------------------------

    def acquire_slot(self, params: AcquireSlotParams) -> SlotResult:
        with self._changed:
            queue = self._queues.get(params.queue)
            tenant = queue.tenants.get(params.tenant) if queue else None
            setting = None if queue is None else queue.max_running
            if queue is not None and tenant is not None:
                setting = queue.cap_of(tenant)
            return self._slots.acquire(params, setting)

    def renew_slots(self, params: RenewSlotsParams) -> RenewSlotsResult:
        with self._changed:
            return self._slots.renew(params.tokens, params.now)

    def release_slots(self, params: ReleaseSlotsParams) -> ReleaseSlotsResult:
        with self._changed:
            return self._slots.release(params.tokens, params.now)

    def leave_line(self, params: LeaveLineParams) -> bool:
        with self._changed:
            return self._slots.leave(params)

    # -- consuming -------------------------------------------------------------------------

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        params = waited_first(params, self.wait)
        with self._changed:
            _, expired = self._maintain(params.now, params.queues)
            leases: list[Lease] = []
            while len(leases) < params.limit:
                lease = self._dispatch_first(params, params.now)
                if lease is None:
                    break
                leases.append(lease)
            return DequeueResult(leases=leases, expired=expired)

    def _dispatch_first(self, params: DequeueParams, now: float) -> Lease | None:
        for name in params.queues:
            queue = self._queues.get(name)
            if queue is None or not queue.has_room():
                continue  # a full queue is skipped: the next one asked is tried
            tenant = queue.first_eligible()
            if tenant is not None:
                return self._dispatch(queue, tenant, params, now)
        return None

    def _dispatch(self, queue: Queue, tenant: Tenant, params: DequeueParams, now: float) -> Lease:
        _, seq = heapq.heappop(tenant.ready_heap)
        job = self._by_seq[seq]
        job.state = JobState.RUNNING
        job.attempts += 1
        job.leases += 1
        job.started_at = now
        job.claimed = params.hold is None  # a relayed job's run starts at its claim
        job.deadline = now + (job.lease_timeout if params.hold is None else params.hold)
        job.worker = params.worker_id
        heapq.heappush(queue.running, (job.deadline, job.seq, job.leases))
        queue.in_flight += 1
        rules.dispatch(queue, tenant, job, now)
        assert job.ready_at is not None
        self._figures.waited(queue.name, tenant.name, now - job.ready_at, now)
        return job.lease()

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        with self._changed:
            acked: list[str] = []
            lost: list[str] = []
            for token, job in held_leases(params.tokens, self._held_now(params.now), lost):
                self._ack(job, params.now)
                if (result := params.results.get(token)) is not None:
                    job.result, job.result_until = result.value, params.now + result.keep
                acked.append(token)
            if acked:
                self._changed.notify_all()
            return AckManyResult(acked=acked, lost=lost)

    def ack_and_dequeue(self, params: AckAndDequeueParams) -> AckAndDequeueResult:
        no_wait(params.dequeue)
        with self._changed:
            return AckAndDequeueResult(
                acks=self.ack_many(params.acks), dequeue=self.dequeue(params.dequeue)
            )

    def _ack(self, job: Job, now: float) -> None:
        assert job.started_at is not None
        self._figures.ended(job.queue, job.tenant, SUCCEEDED, now - job.started_at, now)
        rules.learn(self._queues[job.queue], job, now)
        queue, tenant = self._end_run(job, now, now)
        tenant.succeeded += 1
        tenant.kept += 1
        job.state = JobState.SUCCEEDED
        job.finished_at = now
        rules.retag(queue, tenant)

    def fail(self, params: FailParams) -> JobInfo:
        with self._changed:
            job = self._held(params.token, params.now)
            self._fail(job, params.now, params.now, params.error, params.retry_at)
            self._changed.notify_all()
            return job.info()

    def release(self, params: ReleaseParams) -> None:
        with self._changed:
            job = self._held(params.token, params.now)
            queue, tenant = self._end_run(job, params.now, params.now)
            job.attempts -= 1
            if params.note is not None:
                job.last_error = params.note
            if job.cancel_requested:  # handed back after a cancel request: it ends here
                job.last_error = params.note or CANCELLED_NOTE
                self._run_cancelled(queue, tenant, job, params.now)
            elif params.run_at is None or params.run_at <= params.now:
                self._make_ready(queue, tenant, job, params.now, params.now)
            else:
                job.state = JobState.SCHEDULED
                job.run_at = params.run_at
                tenant.scheduled += 1
                heapq.heappush(queue.scheduled, (params.run_at, job.seq))
            rules.retag(queue, tenant)
            self._changed.notify_all()

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        with self._changed:
            deadlines: dict[str, float] = {}
            lost: list[str] = []
            cancelled: list[str] = []
            claimed: list[str] = []
            for token, job in held_leases(params.tokens, self._held_now(params.now), lost):
                queue = self._queues[job.queue]
                if params.hold is not None:  # the relay keeps what no worker claimed yet
                    if job.claimed:
                        claimed.append(token)
                        continue
                    job.deadline = params.now + params.hold
                elif params.claim and job.claimed:  # a copy of a message whose job runs
                    claimed.append(token)
                    continue
                elif params.claim:  # a relayed job's run starts now
                    job.claimed = True
                    job.started_at = params.now
                    job.deadline = params.now + job.lease_timeout
                elif job.claimed:
                    rules.charge_progress(queue, queue.tenants[job.tenant], job, params.now)
                    job.deadline = params.now + job.lease_timeout
                else:  # unclaimed, not held by its relay: its wait in the broker is no service
                    job.deadline = params.now + job.lease_timeout
                heapq.heappush(queue.running, (job.deadline, job.seq, job.leases))
                deadlines[token] = job.deadline
                if job.cancel_requested:
                    cancelled.append(token)
            return HeartbeatResult(
                deadlines=deadlines, lost=lost, cancelled=cancelled, claimed=claimed
            )

    def checkpoint(self, params: CheckpointParams) -> CheckpointResult:
        with self._changed:
            job = self._held(params.token, params.now)
            queue = self._queues[job.queue]
            if job.claimed:
                rules.charge_progress(queue, queue.tenants[job.tenant], job, params.now)
            job.deadline = params.now + job.lease_timeout
            heapq.heappush(queue.running, (job.deadline, job.seq, job.leases))
            job.progress = params.progress
            return CheckpointResult(deadline=job.deadline)

    # -- ending runs -----------------------------------------------------------------------

    def _held_now(self, now: float) -> Callable[[str], Job]:
        return lambda token: self._held(token, now)

    def _held(self, token: str, now: float) -> Job:
        """The running job a token names, or LeaseNotFound / LeaseExpired."""
        job_id, _, lease_text = token.rpartition(":")
        job = self._jobs.get(job_id)
        if job is None or job.state is not JobState.RUNNING or str(job.leases) != lease_text:
            raise LeaseNotFound.of(token)
        assert job.deadline is not None
        if now >= job.deadline:
            raise LeaseExpired.of(token, job.deadline, now)
        return job

    def _end_run(self, job: Job, ended_at: float | None, now: float) -> tuple[Queue, Tenant]:
        queue = self._queues[job.queue]
        tenant = queue.tenants[job.tenant]
        rules.end_run(queue, tenant, job, ended_at, now)
        queue.in_flight -= 1  # room again: waiters are woken by the event's notify_all
        return queue, tenant

    def _fail(
        self, job: Job, now: float, ended_at: float | None, error: str, retry_at: float | None
    ) -> None:
        if ended_at is None:  # its lease expired: how long it ran is unknown
            self._figures.ended(job.queue, job.tenant, EXPIRED, None, now)
        else:
            assert job.started_at is not None
            outcome = CANCELLED if job.cancel_requested else FAILED
            self._figures.ended(job.queue, job.tenant, outcome, ended_at - job.started_at, now)
            rules.learn(self._queues[job.queue], job, ended_at)
        queue, tenant = self._end_run(job, ended_at, now)
        job.last_error = error
        if not job.cancel_requested or ended_at is None:
            tenant.failed += 1  # a stop its worker reports after a cancel request is no failure
        if job.cancel_requested:  # never retried (fairq/cancel.py)
            self._cancelled(tenant, job, now)
        elif retry_at is None or job.attempts >= job.max_attempts:
            job.state = JobState.DEAD
            job.finished_at = now
            tenant.dead += 1
        elif retry_at <= now:
            self._make_ready(queue, tenant, job, now, now)
        else:
            job.state = JobState.SCHEDULED
            job.run_at = retry_at
            tenant.scheduled += 1
            heapq.heappush(queue.scheduled, (retry_at, job.seq))
        rules.retag(queue, tenant)

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self, params: MaintainParams) -> MaintainResult:
        with self._changed:
            names = sorted(self._queues) if params.queues is None else params.queues
            promoted, expired = self._maintain(params.now, names)
            self._slots.sweep(params.now)
            self._unique.prune(params.now)
            pruned = 0
            if params.retention is not None:
                pruned = self._prune_done(params.now - params.retention, params.now)
            return MaintainResult(
                promoted=promoted,
                expired=expired,
                pruned=pruned,
                next_due=self._next_due(names),
            )

    def _maintain(self, now: float, names: Sequence[str]) -> tuple[int, list[ExpiredLease]]:
        """Promote due jobs, expire overdue leases, then end rate limits that are over."""
        promoted = 0
        expired: list[ExpiredLease] = []
        for name in names:
            queue = self._queues.get(name)
            if queue is not None:
                promoted += self._promote(queue, now)
                expired += self._expire(queue, now)
                self._unlimit(queue, now)
        if promoted or expired:
            self._changed.notify_all()  # jobs ready again, and room freed in capped queues
        return promoted, expired

    def _promote(self, queue: Queue, now: float) -> int:
        count = 0
        while queue.scheduled and queue.scheduled[0][0] <= now:
            run_at, seq = heapq.heappop(queue.scheduled)
            job = self._by_seq[seq]
            tenant = queue.tenants[job.tenant]
            tenant.scheduled -= 1
            self._make_ready(queue, tenant, job, now, run_at)
            count += 1
        return count

    def _expire(self, queue: Queue, now: float) -> list[ExpiredLease]:
        """Overdue leases, in (deadline, seq) order: failed attempts, charged no more than
        the run was charged so far (a crash is not consumption)."""
        expired: list[ExpiredLease] = []
        while (job := self._first_running(queue)) is not None:
            deadline = job.deadline
            if deadline is None or deadline > now:
                break
            heapq.heappop(queue.running)
            if job.claimed:
                self._fail(job, now, None, LEASE_EXPIRED_ERROR, now)
                expired.append(ExpiredLease.of(job, deadline))
            else:
                self._unclaimed(queue, job, now)
                expired.append(ExpiredLease.unclaimed(job, deadline))
        return expired

    def _unclaimed(self, queue: Queue, job: Job, now: float) -> None:
        """A relayed job's hold lapsed before a worker claimed it (its relay died): it never
        ran, so it is ready again with the attempt given back, counted as no failure, and its
        estimate is given back too (a run of no length: a tenant whose jobs waited in a dead
        relay's broker is not charged for service it never had)."""
        assert job.started_at is not None
        _, tenant = self._end_run(job, job.started_at, now)
        job.attempts -= 1
        if job.cancel_requested:
            job.last_error = CANCELLED_NOTE
            self._cancelled(tenant, job, now)
        else:
            self._make_ready(queue, tenant, job, now, now)
        rules.retag(queue, tenant)

    def _unlimit(self, queue: Queue, now: float) -> None:
        while (tenant := rules.first_limited(queue, now)) is not None:
            heapq.heappop(queue.limited)
            tenant.limited_until = None
            rules.refresh(queue, tenant, now)

    # -- settings --------------------------------------------------------------------------

    def set_queue(self, params: SetQueueParams) -> None:
        with self._changed:
            stored = self.get_queue(GetQueueParams(queue=params.settings.queue))
            settings = params.apply_to(stored)
            queue = self._queue(settings.queue)
            queue.weight = settings.weight
            queue.max_running = settings.max_running
            queue.rate = settings.rate
            queue.half_life = settings.half_life
            queue.max_debt = settings.max_debt
            queue.max_in_flight = settings.max_in_flight
            for tenant in queue.tenants.values():
                self._resettle(queue, tenant, params.now)
            self._changed.notify_all()

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        with self._changed:
            queue = self._queue(params.queue)
            tenant = queue.tenant(params.tenant)
            if not isinstance(params.weight, Keep):
                tenant.weight = params.weight
            if not isinstance(params.max_running, Keep):
                tenant.max_running = params.max_running
            if not isinstance(params.rate, Keep):
                tenant.rate = params.rate
            self._resettle(queue, tenant, params.now)
            self._changed.notify_all()
            return self._stats_of(queue, tenant, params.now)

    def _resettle(self, queue: Queue, tenant: Tenant, now: float) -> None:
        """Settings changed: recompute the rate hold, then eligibility."""
        rules.limit_until(queue, tenant, now)
        rules.refresh(queue, tenant, now)

    def publish_job_types(self, params: PublishJobTypesParams) -> None:
        with self._changed:
            self._types.update({t.name: t for t in params.types})

    # -- inspection (the rest: Reads) -------------------------------------------------------------

    def figures(self, params: FiguresParams) -> list[TenantFigures]:
        with self._changed:
            return self._figures.read(params)

    def requeue(self, params: RequeueParams) -> int:
        with self._changed:
            count = 0
            for job_id in params.ids:
                job = self._jobs.get(job_id)
                if job is None or job.state is not JobState.DEAD:
                    continue
                queue = self._queues[job.queue]
                tenant = queue.tenants[job.tenant]
                tenant.dead -= 1
                job.attempts = 0
                job.finished_at = None
                self._make_ready(queue, tenant, job, params.now, params.now)
                count += 1
            self._changed.notify_all()
            return count

    # -- waiting ---------------------------------------------------------------------------

    def wait(self, params: WaitParams) -> None:
        """Return at once when a queue asked already has an eligible tenant and room (work that
        arrived before the wait began is not a lost wake-up), else on the next change or
        timeout. A full queue does not end a wait: its waiters sleep until a lease ends."""
        with self._changed:
            if not self._any_eligible(params.queues):
                self._changed.wait(params.timeout)

    def _any_eligible(self, names: Sequence[str]) -> bool:
        queues = (self._queues.get(name) for name in names)
        return any(
            queue is not None and queue.has_room() and queue.first_eligible() is not None
            for queue in queues
        )

    def close(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # -- shared steps ----------------------------------------------------------------------

    def _queue(self, name: str) -> Queue:
        found = self._queues.get(name)
        if found is None:
            found = self._queues[name] = Queue(name)
        return found

    def _make_ready(
        self, queue: Queue, tenant: Tenant, job: Job, now: float, ready_at: float
    ) -> None:
        returning = tenant.ready == 0
        job.state = JobState.READY
        job.ready_at = ready_at
        tenant.ready += 1
        heapq.heappush(tenant.ready_heap, (-job.priority, job.seq))
        rules.refresh(queue, tenant, now, returning=returning)
