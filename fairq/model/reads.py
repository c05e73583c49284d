"""The model's state and the reads over it: stats, dead jobs, learned costs, a queue's history,
settings, throttle windows."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Sequence

from fairq.contract import (
    GetJobsParams,
    GetQueueParams,
    HistoryPage,
    HistoryParams,
    JobCost,
    JobCostsParams,
    JobType,
    ListDeadParams,
    QueueSettings,
    RecordedJob,
    StatsParams,
    TenantStats,
    ThrottleWindowsParams,
)
from fairq.job import JobInfo, JobState
from fairq.model import rules
from fairq.model.state import Job, Queue, Tenant
from fairq.policy import history


class Reads:
    """The state, its lock (``_changed``, which the model's writes notify) and the reads."""

    def __init__(self) -> None:
        self._changed = threading.Condition(threading.RLock())
        self._queues: dict[str, Queue] = {}
        self._jobs: dict[str, Job] = {}
        self._by_seq: dict[int, Job] = {}
        self._types: dict[str, JobType] = {}
        # (job name, tenant) -> (recent enqueue times, the span they are kept for)
        self._windows: dict[tuple[str, str], tuple[list[float], float]] = {}

    def stats(self, params: StatsParams) -> list[TenantStats]:
        with self._changed:
            return self._stats(params)

    def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        with self._changed:
            return [self._jobs[i].info() for i in params.ids if i in self._jobs]

    def job_costs(self, params: JobCostsParams) -> list[JobCost]:
        with self._changed:
            return self._costs(params)

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        with self._changed:
            return self._dead(params)

    def history(self, params: HistoryParams) -> HistoryPage:
        with self._changed:
            return self._history(params)

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        with self._changed:
            return self._window_times(params)

    def _stats(self, params: StatsParams) -> list[TenantStats]:
        rows = [
            self._stats_of(queue, tenant, params.now)
            for queue in self._queues.values()
            if params.queue is None or queue.name == params.queue
            for tenant in queue.tenants.values()
            if params.tenant is None or tenant.name == params.tenant
        ]
        return sorted(rows, key=lambda r: (r.queue, r.tenant))

    def _stats_of(self, queue: Queue, tenant: Tenant, now: float | None) -> TenantStats:
        ready_at = [self._by_seq[seq].ready_at for _, seq in tenant.ready_heap]
        usage = tenant.usage
        if now is not None:
            usage = history.decayed(usage, tenant.usage_at, now, queue.usage_half_life())
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
            rate=queue.rate_of(tenant),
            limited_until=tenant.limited_until,
            usage=usage,
            cancelled=tenant.cancelled,
        )

    def _dead(self, params: ListDeadParams) -> list[JobInfo]:
        dead = [
            j
            for j in self._jobs.values()
            if j.state is JobState.DEAD
            and (params.queue is None or j.queue == params.queue)
            and (params.tenant is None or j.tenant == params.tenant)
        ]
        dead.sort(key=lambda j: (j.finished_at or 0.0, j.seq))
        return [j.info() for j in dead[: params.limit]]

    def _costs(self, params: JobCostsParams) -> list[JobCost]:
        return sorted(
            (
                JobCost(queue=queue.name, name=name, runs=runs, estimate=mean)
                for queue in self._queues.values()
                if params.queue is None or queue.name == params.queue
                for name, (runs, mean) in queue.costs.items()
            ),
            key=lambda c: (c.queue, c.name),
        )

    def _history(self, params: HistoryParams) -> HistoryPage:
        """The queue's jobs in enqueue order (seq), the cursor the last seq of the page."""
        after = -1 if params.cursor is None else int(params.cursor)
        found = sorted(
            (
                j
                for j in self._jobs.values()
                if j.queue == params.queue
                and j.seq > after
                and params.since <= j.enqueued_at < params.until
            ),
            key=lambda j: j.seq,
        )
        page = found[: params.limit]
        return HistoryPage(
            jobs=[RecordedJob.of(j) for j in page],
            cursor=str(page[-1].seq) if len(found) > params.limit else None,
        )

    def _first_running(self, queue: Queue) -> Job | None:
        while queue.running:
            deadline, seq, lease = queue.running[0]
            job = self._by_seq.get(seq)
            if (
                job is not None
                and job.state is JobState.RUNNING
                and job.leases == lease
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
            limited = rules.next_limited(queue)
            if limited is not None:
                due.append(limited)
        return min(due, default=None)

    def _window_times(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        found: dict[tuple[str, str], list[float]] = {}
        for key in params.keys:
            times, span = self._windows.get(key, ([], 0.0))
            found[key] = [t for t in times if t >= params.now - span]
        return found

    def get_queue(self, params: GetQueueParams) -> QueueSettings:
        queue = params.queue
        found = self._queues.get(queue)
        if found is None:
            return QueueSettings(queue=queue)
        return QueueSettings(
            queue=queue,
            weight=found.weight,
            max_running=found.max_running,
            rate=found.rate,
            half_life=found.half_life,
            max_debt=found.max_debt,
            max_in_flight=found.max_in_flight,
        )

    def job_types(self) -> dict[str, JobType]:
        return dict(self._types)
