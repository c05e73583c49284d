"""A Backend that times every call and hands it to the ``store_call`` hooks.

In the spirit of Oban's engine wrapper: the stores stay free of logging and counting, and one
place sees every call. It is used only when some plug-in overrides ``store_call``
(``App.timed_backend``); otherwise the worker calls the store directly and pays nothing.
Every method is spelled out (no ``__getattr__``): a type checker sees the whole protocol, and a
store's own extras (``bound_to`` on PostgreSQL) stay on ``App.backend``, the store itself.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fairq.backends.aio import AsyncStore
from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    AcquireSlotParams,
    Backend,
    CancelParams,
    CancelResult,
    CheckpointParams,
    CheckpointResult,
    DequeueParams,
    DequeueResult,
    EnqueueParams,
    EnqueueResult,
    FailParams,
    FiguresParams,
    GetJobsParams,
    GetQueueParams,
    HeartbeatParams,
    HeartbeatResult,
    HistoryPage,
    HistoryParams,
    JobCost,
    JobCostsParams,
    JobType,
    LeaveLineParams,
    ListDeadParams,
    MaintainParams,
    MaintainResult,
    PublishJobTypesParams,
    QueueSettings,
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
    StatsParams,
    TenantFigures,
    TenantSettingsParams,
    TenantStats,
    ThrottleWindowsParams,
    WaitParams,
)
from fairq.instrument import StoreCall
from fairq.instrument.hooks import Hooks
from fairq.job import JobInfo

P = TypeVar("P")
R = TypeVar("R")


class TimedBackend:
    """``inner``, each call timed (wall clock) and reported to ``hooks.store_call``."""

    def __init__(self, inner: Backend, hooks: Hooks) -> None:
        self.inner = inner
        self.hooks = hooks

    def _timed(self, op: str, call: Callable[[P], R], params: P) -> R:
        started = time.perf_counter()
        try:
            result = call(params)
        except BaseException as exc:
            self.hooks.store_call(StoreCall(op, time.perf_counter() - started, exc))
            raise
        self.hooks.store_call(StoreCall(op, time.perf_counter() - started))
        return result

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        return self._timed("enqueue", self.inner.enqueue, params)

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        # A waiting dequeue lasts as long as nothing arrives: not a store latency.
        op = "dequeue_wait" if params.wait > 0 else "dequeue"
        return self._timed(op, self.inner.dequeue, params)

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        return self._timed("ack_many", self.inner.ack_many, params)

    def ack_and_dequeue(self, params: AckAndDequeueParams) -> AckAndDequeueResult:
        return self._timed("ack_and_dequeue", self.inner.ack_and_dequeue, params)

    def fail(self, params: FailParams) -> JobInfo:
        return self._timed("fail", self.inner.fail, params)

    def release(self, params: ReleaseParams) -> None:
        self._timed("release", self.inner.release, params)

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        return self._timed("heartbeat", self.inner.heartbeat, params)

    def checkpoint(self, params: CheckpointParams) -> CheckpointResult:
        return self._timed("checkpoint", self.inner.checkpoint, params)

    def maintain(self, params: MaintainParams) -> MaintainResult:
        return self._timed("maintain", self.inner.maintain, params)

    def set_queue(self, params: SetQueueParams) -> None:
        self._timed("set_queue", self.inner.set_queue, params)

    def get_queue(self, params: GetQueueParams) -> QueueSettings:
        return self._timed("get_queue", self.inner.get_queue, params)

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return self._timed("set_tenant", self.inner.set_tenant, params)

    def stats(self, params: StatsParams) -> list[TenantStats]:
        return self._timed("stats", self.inner.stats, params)

    def figures(self, params: FiguresParams) -> list[TenantFigures]:
        return self._timed("figures", self.inner.figures, params)

    def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return self._timed("get_jobs", self.inner.get_jobs, params)

    def job_costs(self, params: JobCostsParams) -> list[JobCost]:
        return self._timed("job_costs", self.inner.job_costs, params)

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        return self._timed("list_dead", self.inner.list_dead, params)

    def history(self, params: HistoryParams) -> HistoryPage:
        return self._timed("history", self.inner.history, params)

    def requeue(self, params: RequeueParams) -> int:
        return self._timed("requeue", self.inner.requeue, params)

    def cancel(self, params: CancelParams) -> CancelResult:
        return self._timed("cancel", self.inner.cancel, params)

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        return self._timed("throttle_windows", self.inner.throttle_windows, params)

    def route(self, params: RouteParams) -> RouteResult:
        return self._timed("route", self.inner.route, params)

    def acquire_slot(self, params: AcquireSlotParams) -> SlotResult:
        return self._timed("acquire_slot", self.inner.acquire_slot, params)

    def renew_slots(self, params: RenewSlotsParams) -> RenewSlotsResult:
        return self._timed("renew_slots", self.inner.renew_slots, params)

    def release_slots(self, params: ReleaseSlotsParams) -> ReleaseSlotsResult:
        return self._timed("release_slots", self.inner.release_slots, params)

    def leave_line(self, params: LeaveLineParams) -> bool:
        return self._timed("leave_line", self.inner.leave_line, params)

    def publish_job_types(self, params: PublishJobTypesParams) -> None:
        self._timed("publish_job_types", self.inner.publish_job_types, params)

    def job_types(self) -> dict[str, JobType]:
        return self._timed("job_types", lambda _: self.inner.job_types(), None)

    def wait(self, params: WaitParams) -> None:
        self._timed("wait", self.inner.wait, params)

    def close(self) -> None:
        self.inner.close()


class TimedAsyncStore:
    """``TimedBackend`` for an async store (fairq/backends/aio.py): each awaited call timed
    from its start to its result, the time in the loop and in a thread alike."""

    def __init__(self, inner: AsyncStore, hooks: Hooks) -> None:
        self.inner = inner
        self.hooks = hooks
        self.native = inner.native

    async def _timed(self, op: str, call: Callable[[P], Awaitable[R]], params: P) -> R:
        started = time.perf_counter()
        try:
            result = await call(params)
        except BaseException as exc:
            self.hooks.store_call(StoreCall(op, time.perf_counter() - started, exc))
            raise
        self.hooks.store_call(StoreCall(op, time.perf_counter() - started))
        return result

    async def open(self) -> None:
        await self.inner.open()

    async def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        return await self._timed("enqueue", self.inner.enqueue, params)

    async def job_types(self) -> dict[str, JobType]:
        return await self._timed("job_types", lambda _: self.inner.job_types(), None)

    async def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return await self._timed("set_tenant", self.inner.set_tenant, params)

    async def set_queue(self, params: SetQueueParams) -> None:
        await self._timed("set_queue", self.inner.set_queue, params)

    async def stats(self, params: StatsParams) -> list[TenantStats]:
        return await self._timed("stats", self.inner.stats, params)

    async def figures(self, params: FiguresParams) -> list[TenantFigures]:
        return await self._timed("figures", self.inner.figures, params)

    async def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return await self._timed("get_jobs", self.inner.get_jobs, params)

    async def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        return await self._timed("list_dead", self.inner.list_dead, params)

    async def requeue(self, params: RequeueParams) -> int:
        return await self._timed("requeue", self.inner.requeue, params)

    async def cancel(self, params: CancelParams) -> CancelResult:
        return await self._timed("cancel", self.inner.cancel, params)

    async def aclose(self) -> None:
        await self.inner.aclose()
