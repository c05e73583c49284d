"""``SQLiteBackend``: the Backend protocol on one SQLite file, for one machine.

Each method is one short transaction on the backend's connection; the rules themselves live
in the modules it calls (producing, consuming, maintenance, settings, inspect: the layout
every store shares, docs/internals/stores.md). Several processes may share the file: SQLite
serialises their write transactions, and ``BEGIN IMMEDIATE`` makes each one atomic from its
first read, so the read-modify-write of tags cannot interleave.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from fairq.backends.clock import Clock
from fairq.backends.sqlite import (
    cancelling,
    consuming,
    costs,
    figures,
    history,
    inspect,
    maintenance,
    producing,
    settings,
    slots,
    throttling,
)
from fairq.backends.sqlite.db import Store
from fairq.backends.sqlite.migrate import connect, prepare
from fairq.backends.sqlite.url import path_from_url
from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    AcquireSlotParams,
    CancelParams,
    CancelResult,
    CheckpointParams,
    CheckpointResult,
    DequeueParams,
    DequeueResult,
    EnqueueParams,
    EnqueueResult,
    FailParams,
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
    TenantSettingsParams,
    TenantStats,
    ThrottleWindowsParams,
    WaitParams,
    no_wait,
)
from fairq.figures import FiguresParams, TenantFigures
from fairq.job import JobInfo, check_distinct
from fairq.policy.throttle import Routing

T = TypeVar("T")


class SQLiteBackend:
    """Fair per-tenant queues in a SQLite file (WAL mode). Safe across threads and processes.

    ``busy_timeout``: seconds SQLite itself waits for another connection's write lock;
    ``lock_wait``: seconds fairq keeps retrying after that before raising StoreUnavailable;
    ``clock``: whose clock stamps events (fairq.backends.clock).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 5.0,
        lock_wait: float = 30.0,
        clock: Clock = Clock.STORE,
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        conn = connect(self.path, busy_timeout=busy_timeout)
        self._store = Store(conn, self.path, lock_wait=lock_wait)
        self._seen = threading.local()  # per thread: the version its last empty dequeue saw
        try:
            prepare(self._store)
        except BaseException:
            self._store.close()
            raise

    @classmethod
    def from_url(cls, url: str, *, clock: Clock = Clock.STORE) -> SQLiteBackend:
        """``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (the path is taken
        verbatim; there are no URL options, so a ``?`` is refused: ``clock`` is a parameter)."""
        return cls(path_from_url(url), clock=clock)

    def __repr__(self) -> str:
        return f"SQLiteBackend({str(self.path)!r})"

    def _at(self, now: float) -> float:
        """An event's time. Called inside a write, so the clock is read once the write lock
        is held: a transaction that waited for another process's lock starts its leases
        after the wait and charges no run for it."""
        return max(now, time.time()) if self.clock is Clock.STORE else now

    # -- producing and consuming -----------------------------------------------------------------

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        if not params.jobs:
            return EnqueueResult(queues=[])
        check_distinct(params.jobs)
        queues, existing = self._store.write(
            lambda db: producing.enqueue(db, params.jobs, self._at(params.now))
        )
        return EnqueueResult(queues=queues, existing=existing)

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        """A waiting dequeue right after an empty one of the same thread waits for commits
        since that one looked, not since the wait began: an ack in between (one that freed a
        capped tenant or a full queue) ends the wait at once instead of being missed."""
        if params.wait > 0:
            started = time.monotonic()
            self._store.wait_for_change(params.wait, since=getattr(self._seen, "version", None))
            params = replace(params, now=params.now + (time.monotonic() - started), wait=0.0)

        def work(db: sqlite3.Connection) -> tuple[DequeueResult, tuple[int, int]]:
            at = self._at(params.now)
            found = figures.flushed(
                db, at, lambda db: consuming.dequeue(db, replace(params, now=at))
            )
            return found, self._store.version_within(db)

        result, version = self._store.write(work)
        self._seen.version = None if result.leases else version
        return result

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        if not params.tokens:
            return AckManyResult()
        ack = partial(consuming.ack_many, tokens=params.tokens, results=params.results)
        return self._store.write(lambda db: self._recorded(db, params.now, ack))

    def ack_and_dequeue(self, params: AckAndDequeueParams) -> AckAndDequeueResult:
        no_wait(params.dequeue)

        def both(db: sqlite3.Connection) -> AckAndDequeueResult:
            tokens, results = params.acks.tokens, params.acks.results
            at = self._at(params.acks.now)
            learned = costs.Costs(db)  # the dispatches charge what the acks just taught
            acked = consuming.ack_many(db, tokens, at, results, learned) if tokens else None
            dequeue = replace(params.dequeue, now=self._at(params.dequeue.now))
            return AckAndDequeueResult(
                acks=acked or AckManyResult(), dequeue=consuming.dequeue(db, dequeue, learned)
            )

        return self._store.write(lambda db: figures.flushed(db, self._at(params.dequeue.now), both))

    def fail(self, params: FailParams) -> JobInfo:
        fail = partial(
            consuming.fail, token=params.token, error=params.error, retry_at=params.retry_at
        )
        return self._store.write(lambda db: self._recorded(db, params.now, fail))

    def release(self, params: ReleaseParams) -> None:
        def work(db: sqlite3.Connection, now: float) -> None:
            consuming.release(db, replace(params, now=now))

        self._store.write(lambda db: self._recorded(db, params.now, work))

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        return self._store.write(
            lambda db: consuming.heartbeat(db, replace(params, now=self._at(params.now)))
        )

    def checkpoint(self, params: CheckpointParams) -> CheckpointResult:
        return self._store.write(
            lambda db: consuming.checkpoint(db, replace(params, now=self._at(params.now)))
        )

    def maintain(self, params: MaintainParams) -> MaintainResult:
        def work(db: sqlite3.Connection, now: float) -> MaintainResult:
            return maintenance.maintain(db, replace(params, now=now))

        return self._store.write(lambda db: self._recorded(db, params.now, work))

    def _recorded(self, db: sqlite3.Connection, now: float, work: Callable[..., T]) -> T:
        """``work(db, now=…)`` at the event's time, its figures added at its end."""
        at = self._at(now)
        return figures.flushed(db, at, lambda db: work(db, now=at))

    # -- routing and tenant slots (for peer brokers' jobs) -----------------------------------------

    def route(self, params: RouteParams) -> RouteResult:
        routing = Routing(params.name, params.tenant, params.queue, params.rules)
        return RouteResult(
            queue=self._store.write(lambda db: throttling.count(db, routing, self._at(params.now)))
        )

    def acquire_slot(self, params: AcquireSlotParams) -> SlotResult:
        return self._store.write(
            lambda db: slots.acquire(db, replace(params, now=self._at(params.now)))
        )

    def renew_slots(self, params: RenewSlotsParams) -> RenewSlotsResult:
        return self._store.write(lambda db: slots.renew(db, params.tokens, self._at(params.now)))

    def release_slots(self, params: ReleaseSlotsParams) -> ReleaseSlotsResult:
        return self._store.write(lambda db: slots.release(db, params.tokens, self._at(params.now)))

    def leave_line(self, params: LeaveLineParams) -> bool:
        return self._store.write(lambda db: slots.leave(db, params))

    # -- settings --------------------------------------------------------------------------------

    def set_queue(self, params: SetQueueParams) -> None:
        self._store.write(
            lambda db: settings.set_queue(db, replace(params, now=self._at(params.now)))
        )

    def get_queue(self, params: GetQueueParams) -> QueueSettings:
        return self._store.read(lambda db: settings.get_queue(db, params.queue))

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return self._store.write(
            lambda db: settings.set_tenant(db, replace(params, now=self._at(params.now)))
        )

    # -- inspection ------------------------------------------------------------------------------

    def stats(self, params: StatsParams) -> list[TenantStats]:
        return self._store.read(lambda db: inspect.stats(db, params))

    def figures(self, params: FiguresParams) -> list[TenantFigures]:
        return self._store.read(lambda db: figures.read(db, params))

    def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return self._store.read(lambda db: inspect.get_jobs(db, params.ids))

    def job_costs(self, params: JobCostsParams) -> list[JobCost]:
        return self._store.read(lambda db: costs.read(db, params))

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        return self._store.read(lambda db: inspect.list_dead(db, params))

    def history(self, params: HistoryParams) -> HistoryPage:
        return self._store.read(lambda db: history.read(db, params))

    def requeue(self, params: RequeueParams) -> int:
        return self._store.write(lambda db: inspect.requeue(db, params.ids, self._at(params.now)))

    def cancel(self, params: CancelParams) -> CancelResult:
        return CancelResult(
            outcomes=self._store.write(
                lambda db: cancelling.cancel(db, params.ids, self._at(params.now))
            )
        )

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        return self._store.read(lambda db: throttling.windows(db, params))

    # -- job declarations --------------------------------------------------------------------------

    def publish_job_types(self, params: PublishJobTypesParams) -> None:
        self._store.write(lambda db: inspect.publish_job_types(db, params.types))

    def job_types(self) -> dict[str, JobType]:
        return self._store.read(inspect.job_types)

    # -- waiting and closing -----------------------------------------------------------------------

    def wait(self, params: WaitParams) -> None:
        """Return on any commit to the file (any queue: cheap, and "may have arrived" allows it)."""
        self._store.wait_for_change(params.timeout)

    def close(self) -> None:
        self._store.close()
