"""``SQLiteBackend``: the Backend protocol on one SQLite file, for one machine.

Each method is one short transaction on the backend's connection; the rules themselves live
in the modules it calls (leases, maintenance, producing, admin). Several processes may share
the file: SQLite serialises their write transactions, and ``BEGIN IMMEDIATE`` makes each one
atomic from its first read, so the read-modify-write of tags cannot interleave.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fairq.backends.sqlite import admin, leases, maintenance, producing, throttling
from fairq.backends.sqlite.schema import connect, prepare
from fairq.backends.sqlite.store import Store
from fairq.backends.sqlite.url import path_from_url
from fairq.contract import (
    AckManyParams,
    AckManyResult,
    AckParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    HeartbeatParams,
    HeartbeatResult,
    JobType,
    ListDeadParams,
    MaintainParams,
    MaintainResult,
    QueueSettings,
    ReleaseParams,
    RequeueParams,
    SetQueueParams,
    StatsParams,
    TenantSettingsParams,
    TenantStats,
    ThrottleWindowsParams,
    no_wait,
    waited_first,
)
from fairq.job import JobInfo, Lease


class SQLiteBackend:
    """Fair per-tenant queues in a SQLite file (WAL mode). Safe across threads and processes.

    ``busy_timeout``: seconds SQLite itself waits for another connection's write lock;
    ``lock_wait``: seconds fairq keeps retrying after that before raising StoreUnavailable.
    """

    def __init__(
        self, path: str | Path, *, busy_timeout: float = 5.0, lock_wait: float = 30.0
    ) -> None:
        self.path = Path(path)
        conn = connect(self.path, busy_timeout=busy_timeout)
        self._store = Store(conn, self.path, lock_wait=lock_wait)
        try:
            prepare(self._store)
        except BaseException:
            self._store.close()
            raise

    @classmethod
    def from_url(cls, url: str) -> SQLiteBackend:
        """``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``."""
        return cls(path_from_url(url))

    def __repr__(self) -> str:
        return f"SQLiteBackend({str(self.path)!r})"

    # -- producing and consuming -----------------------------------------------------------------

    def enqueue(self, params: EnqueueParams) -> list[str]:
        if not params.jobs:
            return []
        return self._store.write(lambda db: producing.enqueue(db, params.jobs, params.now))

    def dequeue(self, params: DequeueParams) -> list[Lease]:
        params = waited_first(params, self.wait)
        return self._store.write(lambda db: leases.dequeue(db, params))

    def ack(self, params: AckParams) -> None:
        self._store.write(lambda db: leases.ack(db, params.token, params.now))

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        if not params.tokens:
            return AckManyResult()
        return self._store.write(lambda db: leases.ack_many(db, params.tokens, params.now))

    def ack_and_dequeue(
        self, acks: AckManyParams, params: DequeueParams
    ) -> tuple[AckManyResult, list[Lease]]:
        no_wait(params)
        tokens = acks.tokens
        return self._store.write(
            lambda db: (
                leases.ack_many(db, tokens, acks.now) if tokens else AckManyResult(),
                leases.dequeue(db, params),
            )
        )

    def fail(self, params: FailParams) -> JobInfo:
        return self._store.write(
            lambda db: leases.fail(db, params.token, params.now, params.error, params.retry_at)
        )

    def release(self, params: ReleaseParams) -> None:
        self._store.write(lambda db: leases.release(db, params.token, params.now))

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        return self._store.write(lambda db: leases.heartbeat(db, params.tokens, params.now))

    def maintain(self, params: MaintainParams) -> MaintainResult:
        return self._store.write(lambda db: maintenance.maintain(db, params))

    # -- settings --------------------------------------------------------------------------------

    def set_queue(self, params: SetQueueParams) -> None:
        self._store.write(lambda db: admin.set_queue(db, params))

    def get_queue(self, queue: str) -> QueueSettings:
        return self._store.read(lambda db: admin.get_queue(db, queue))

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return self._store.write(lambda db: admin.set_tenant(db, params))

    # -- inspection ------------------------------------------------------------------------------

    def stats(self, params: StatsParams) -> list[TenantStats]:
        return self._store.read(lambda db: admin.stats(db, params))

    def get_jobs(self, ids: Sequence[str]) -> list[JobInfo]:
        return self._store.read(lambda db: admin.get_jobs(db, ids))

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        return self._store.read(lambda db: admin.list_dead(db, params))

    def requeue(self, params: RequeueParams) -> int:
        return self._store.write(lambda db: admin.requeue(db, params.ids, params.now))

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        return self._store.read(lambda db: throttling.windows(db, params))

    # -- job declarations --------------------------------------------------------------------------

    def publish_job_types(self, types: Sequence[JobType]) -> None:
        self._store.write(lambda db: admin.publish_job_types(db, types))

    def job_types(self) -> dict[str, JobType]:
        return self._store.read(admin.job_types)

    # -- waiting and closing -----------------------------------------------------------------------

    def wait(self, queues: Sequence[str], timeout: float) -> None:
        """Return on any commit to the file (any queue: cheap, and "may have arrived" allows it)."""
        self._store.wait_for_change(timeout)

    def close(self) -> None:
        self._store.close()
