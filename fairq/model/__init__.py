"""The reference model: the scheduling rules (docs/internals/scheduler.md) as plain Python.

No I/O and no clock: every call carries ``now``. It is the executable spec: the conformance
suite runs the same scenarios against it and against every store, and the simulator drives it
directly. It also serves ``memory://`` for single-process use (tests, notebooks).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Sequence

from fairq.contract import (
    AckParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    HeartbeatParams,
    HeartbeatResult,
    JobType,
    Keep,
    ListDeadParams,
    MaintainParams,
    MaintainResult,
    QueueSettings,
    ReleaseParams,
    RequeueParams,
    StatsParams,
    TenantSettingsParams,
    TenantStats,
)
from fairq.errors import DuplicateJob, LeaseExpired, LeaseNotFound
from fairq.job import JobInfo, JobState, Lease
from fairq.model.state import Job, Queue, Tenant
from fairq.policy import fairness

LEASE_EXPIRED_ERROR = "lease expired"


class ReferenceModel:
    """An in-memory store that follows the rules to the letter. Thread-safe; one process."""

    def __init__(self) -> None:
        self._queues: dict[str, Queue] = {}
        self._jobs: dict[str, Job] = {}
        self._by_seq: dict[int, Job] = {}
        self._seq = 0
        self._types: dict[str, JobType] = {}
        self._changed = threading.Condition(threading.RLock())

    # -- producing -------------------------------------------------------------------------

    def enqueue(self, params: EnqueueParams) -> None:
        with self._changed:
            duplicate = [j.id for j in params.jobs if j.id in self._jobs]
            if duplicate or len({j.id for j in params.jobs}) != len(params.jobs):
                raise DuplicateJob(f"job ids already stored or repeated: {duplicate}")
            for new in params.jobs:
                self._seq += 1
                job = Job(
                    seq=self._seq,
                    id=new.id,
                    name=new.name,
                    queue=new.queue,
                    tenant=new.tenant,
                    payload=new.payload,
                    priority=new.priority,
                    state=JobState.SCHEDULED,
                    enqueued_at=params.now,
                    run_at=new.run_at,
                    ready_at=None,
                    max_attempts=new.max_attempts,
                    lease_timeout=new.lease_timeout,
                    cost=new.cost,
                )
                self._jobs[job.id] = job
                self._by_seq[job.seq] = job
                queue = self._queue(job.queue)
                tenant = queue.tenant(job.tenant)
                if job.run_at <= params.now:
                    self._make_ready(queue, tenant, job, params.now)
                else:
                    tenant.scheduled += 1
                    heapq.heappush(queue.scheduled, (job.run_at, job.seq))
            self._changed.notify_all()

    # -- consuming -------------------------------------------------------------------------

    def dequeue(self, params: DequeueParams) -> list[Lease]:
        with self._changed:
            self._maintain(params.now, params.queues)
            leases: list[Lease] = []
            while len(leases) < params.limit:
                lease = self._dispatch_first(params.queues, params.worker_id, params.now)
                if lease is None:
                    break
                leases.append(lease)
            return leases

    def _dispatch_first(self, queues: Sequence[str], worker: str, now: float) -> Lease | None:
        for name in queues:
            queue = self._queues.get(name)
            tenant = queue.first_eligible() if queue else None
            if queue is not None and tenant is not None:
                return self._dispatch(queue, tenant, worker, now)
        return None

    def _dispatch(self, queue: Queue, tenant: Tenant, worker: str, now: float) -> Lease:
        assert tenant.start is not None
        _, seq = heapq.heappop(tenant.ready_heap)
        job = self._by_seq[seq]
        job.state = JobState.RUNNING
        job.attempts += 1
        job.started_at = now
        job.deadline = now + job.lease_timeout
        job.worker = worker
        heapq.heappush(queue.running, (job.deadline, job.seq, job.attempts))
        queue.vclock = tenant.start
        tenant.finish = fairness.finish_after_dispatch(
            tenant.start, job.cost, queue.weight_of(tenant)
        )
        tenant.ready -= 1
        tenant.running += 1
        tenant.start = tenant.finish if self._eligible(queue, tenant) else None
        queue.index(tenant)
        return job.lease()

    def ack(self, params: AckParams) -> None:
        with self._changed:
            job = self._held(params.token, params.now)
            queue, tenant = self._end_run(job, params.now)
            tenant.succeeded += 1
            job.state = JobState.SUCCEEDED
            job.finished_at = params.now
            self._retag(queue, tenant)
            self._changed.notify_all()

    def fail(self, params: FailParams) -> JobInfo:
        with self._changed:
            job = self._held(params.token, params.now)
            self._fail(job, params.now, params.now, params.error, params.retry_at)
            self._changed.notify_all()
            return job.info()

    def release(self, params: ReleaseParams) -> None:
        with self._changed:
            job = self._held(params.token, params.now)
            queue, tenant = self._end_run(job, params.now)
            job.attempts -= 1
            self._make_ready(queue, tenant, job, params.now)
            self._retag(queue, tenant)
            self._changed.notify_all()

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        with self._changed:
            deadlines: dict[str, float] = {}
            lost: list[str] = []
            for token in params.tokens:
                try:
                    job = self._held(token, params.now)
                except (LeaseExpired, LeaseNotFound):
                    lost.append(token)
                    continue
                job.deadline = params.now + job.lease_timeout
                queue = self._queues[job.queue]
                heapq.heappush(queue.running, (job.deadline, job.seq, job.attempts))
                deadlines[token] = job.deadline
            return HeartbeatResult(deadlines=deadlines, lost=lost)

    # -- ending runs -----------------------------------------------------------------------

    def _held(self, token: str, now: float) -> Job:
        """The running job a token names, or LeaseNotFound / LeaseExpired."""
        job_id, _, attempt_text = token.rpartition(":")
        job = self._jobs.get(job_id)
        if job is None or job.state is not JobState.RUNNING or str(job.attempts) != attempt_text:
            raise LeaseNotFound(
                f"no job is held under lease {token!r}: it was never issued, is already "
                "finished, or expired and was handed out again"
            )
        assert job.deadline is not None
        if now >= job.deadline:
            raise LeaseExpired(
                f"lease {token!r} expired at {job.deadline:.3f} (now {now:.3f}); the job goes "
                "back to its queue, so its result is not recorded"
            )
        return job

    def _end_run(self, job: Job, ended_at: float) -> tuple[Queue, Tenant]:
        """Charge the run's real cost in place of its estimate and free its slot."""
        queue = self._queues[job.queue]
        tenant = queue.tenants[job.tenant]
        assert job.started_at is not None
        tenant.finish = fairness.finish_after_run(
            tenant.finish,
            job.cost,
            fairness.run_charge(job.started_at, ended_at),
            queue.weight_of(tenant),
        )
        tenant.running -= 1
        job.deadline = None
        return queue, tenant

    def _fail(
        self, job: Job, now: float, ended_at: float, error: str, retry_at: float | None
    ) -> None:
        queue, tenant = self._end_run(job, ended_at)
        tenant.failed += 1
        job.last_error = error
        if retry_at is None or job.attempts >= job.max_attempts:
            job.state = JobState.DEAD
            job.finished_at = now
            tenant.dead += 1
        elif retry_at <= now:
            self._make_ready(queue, tenant, job, now)
        else:
            job.state = JobState.SCHEDULED
            job.run_at = retry_at
            tenant.scheduled += 1
            heapq.heappush(queue.scheduled, (retry_at, job.seq))
        self._retag(queue, tenant)

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self, params: MaintainParams) -> MaintainResult:
        with self._changed:
            names = list(self._queues) if params.queues is None else params.queues
            promoted, expired = self._maintain(params.now, names)
            pruned = 0
            if params.retention is not None:
                pruned = self._prune(params.now - params.retention)
            return MaintainResult(
                promoted=promoted,
                expired=expired,
                pruned=pruned,
                next_due=self._next_due(names),
            )

    def _maintain(self, now: float, names: Sequence[str]) -> tuple[int, int]:
        promoted = expired = 0
        for name in names:
            queue = self._queues.get(name)
            if queue is not None:
                promoted += self._promote(queue, now)
                expired += self._expire(queue, now)
        return promoted, expired

    def _promote(self, queue: Queue, now: float) -> int:
        count = 0
        while queue.scheduled and queue.scheduled[0][0] <= now:
            _, seq = heapq.heappop(queue.scheduled)
            job = self._by_seq[seq]
            tenant = queue.tenants[job.tenant]
            tenant.scheduled -= 1
            self._make_ready(queue, tenant, job, now)
            count += 1
        return count

    def _expire(self, queue: Queue, now: float) -> int:
        count = 0
        while (job := self._first_running(queue)) is not None:
            deadline = job.deadline
            if deadline is None or deadline > now:
                break
            heapq.heappop(queue.running)
            self._fail(job, now, deadline, LEASE_EXPIRED_ERROR, now)
            count += 1
        return count

    def _first_running(self, queue: Queue) -> Job | None:
        while queue.running:
            deadline, seq, attempt = queue.running[0]
            job = self._by_seq.get(seq)
            if (
                job is not None
                and job.state is JobState.RUNNING
                and job.attempts == attempt
                and job.deadline == deadline
            ):
                return job
            heapq.heappop(queue.running)
        return None

    def _next_due(self, names: Sequence[str]) -> float | None:
        due: list[float] = []
        for name in names:
            queue = self._queues.get(name)
            if queue is None:
                continue
            if queue.scheduled:
                due.append(queue.scheduled[0][0])
            job = self._first_running(queue)
            if job is not None and job.deadline is not None:
                due.append(job.deadline)
        return min(due, default=None)

    def _prune(self, before: float) -> int:
        old = [
            j
            for j in self._jobs.values()
            if j.state is JobState.SUCCEEDED and (j.finished_at or 0.0) < before
        ]
        for job in old:
            del self._jobs[job.id]
            del self._by_seq[job.seq]
        return len(old)

    # -- settings --------------------------------------------------------------------------

    def set_queue(self, settings: QueueSettings) -> None:
        with self._changed:
            queue = self._queue(settings.queue)
            queue.weight = settings.weight
            queue.max_running = settings.max_running
            for tenant in queue.tenants.values():
                if tenant.weight is None or tenant.max_running is None:
                    self._refresh(queue, tenant)
            self._changed.notify_all()

    def get_queue(self, queue: str) -> QueueSettings:
        with self._changed:
            found = self._queues.get(queue)
            if found is None:
                return QueueSettings(queue=queue)
            return QueueSettings(
                queue=queue, weight=found.weight, max_running=found.max_running
            )

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        with self._changed:
            queue = self._queue(params.queue)
            tenant = queue.tenant(params.tenant)
            if not isinstance(params.weight, Keep):
                tenant.weight = params.weight
            if not isinstance(params.max_running, Keep):
                tenant.max_running = params.max_running
            self._refresh(queue, tenant)
            self._changed.notify_all()
            return self._stats_of(queue, tenant)

    def publish_job_types(self, types: Sequence[JobType]) -> None:
        with self._changed:
            self._types.update({t.name: t for t in types})

    def job_types(self) -> dict[str, JobType]:
        with self._changed:
            return dict(self._types)

    # -- inspection ------------------------------------------------------------------------

    def stats(self, params: StatsParams) -> list[TenantStats]:
        with self._changed:
            rows = [
                self._stats_of(queue, tenant)
                for queue in self._queues.values()
                if params.queue is None or queue.name == params.queue
                for tenant in queue.tenants.values()
                if params.tenant is None or tenant.name == params.tenant
            ]
            return sorted(rows, key=lambda r: (r.queue, r.tenant))

    def _stats_of(self, queue: Queue, tenant: Tenant) -> TenantStats:
        ready_at = [self._by_seq[seq].ready_at for _, seq in tenant.ready_heap]
        return TenantStats(
            queue=queue.name,
            tenant=tenant.name,
            weight=queue.weight_of(tenant),
            max_running=queue.cap_of(tenant),
            ready=tenant.ready,
            scheduled=tenant.scheduled,
            running=tenant.running,
            succeeded=tenant.succeeded,
            failed=tenant.failed,
            dead=tenant.dead,
            oldest_ready_at=min((t for t in ready_at if t is not None), default=None),
        )

    def get_jobs(self, ids: Sequence[str]) -> list[JobInfo]:
        with self._changed:
            return [self._jobs[i].info() for i in ids if i in self._jobs]

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        with self._changed:
            dead = [
                j
                for j in self._jobs.values()
                if j.state is JobState.DEAD
                and (params.queue is None or j.queue == params.queue)
                and (params.tenant is None or j.tenant == params.tenant)
            ]
            dead.sort(key=lambda j: (j.finished_at or 0.0, j.seq))
            return [j.info() for j in dead[: params.limit]]

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
                self._make_ready(queue, tenant, job, params.now)
                count += 1
            self._changed.notify_all()
            return count

    # -- waiting ---------------------------------------------------------------------------

    def wait(self, queues: Sequence[str], timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)

    def close(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # -- shared steps ----------------------------------------------------------------------

    def _queue(self, name: str) -> Queue:
        found = self._queues.get(name)
        if found is None:
            found = self._queues[name] = Queue(name)
        return found

    def _eligible(self, queue: Queue, tenant: Tenant) -> bool:
        return fairness.is_eligible(tenant.ready, tenant.running, queue.cap_of(tenant))

    def _make_ready(self, queue: Queue, tenant: Tenant, job: Job, now: float) -> None:
        job.state = JobState.READY
        job.ready_at = now
        tenant.ready += 1
        heapq.heappush(tenant.ready_heap, (-job.priority, job.seq))
        self._refresh(queue, tenant)

    def _refresh(self, queue: Queue, tenant: Tenant) -> None:
        """A tenant that becomes eligible starts at max(F, V); one that stops leaves the index."""
        if not self._eligible(queue, tenant):
            tenant.start = None
        elif tenant.start is None:
            tenant.start = fairness.start_tag(tenant.finish, queue.vclock)
        queue.index(tenant)

    def _retag(self, queue: Queue, tenant: Tenant) -> None:
        """After a run's cost is settled, an eligible tenant's start tag is max(F, V)."""
        if self._eligible(queue, tenant):
            tenant.start = fairness.start_tag(tenant.finish, queue.vclock)
        else:
            tenant.start = None
        queue.index(tenant)
