"""Rows of ``jobs`` and ``tenants`` as mutable records, read and written whole.

An event loads the rows it touches (locked, or covered by the exclusive queue lock), applies
the rules in Python with the very functions the reference model calls, so tags are
bit-identical, and writes them back in the same transaction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.contract import TenantStats
from fairq.job import JobInfo, JobState, Lease, lease_token

Row = dict[str, Any]


def tenant_key(tenant: str) -> bytes:
    """The digest the tenants' unique index holds (tenant ids may be longer than an index entry)."""
    return hashlib.sha256(tenant.encode("utf-8")).digest()


@dataclass
class TenantRow:
    id: int
    queue: str
    tenant: str
    own_weight: float | None
    own_max_running: int | None
    weight: float  # effective: own setting, else the queue's default
    max_running: int | None  # effective
    finish: float
    start: float | None
    ready: int
    scheduled: int
    running: int
    succeeded: int
    failed: int
    dead: int
    was_running: int = field(default=0, compare=False)  # as loaded: the slot guard in tenant_save

    @classmethod
    def from_row(cls, row: Row, prefix: str = "") -> TenantRow:
        def get(key: str) -> Any:
            return row[prefix + key]

        return cls(
            id=get("id"),
            queue=get("queue"),
            tenant=get("tenant"),
            own_weight=get("own_weight"),
            own_max_running=get("own_max_running"),
            weight=get("weight"),
            max_running=get("max_running"),
            finish=get("finish_tag"),
            start=get("start_tag"),
            ready=get("ready"),
            scheduled=get("scheduled"),
            running=get("running"),
            succeeded=get("succeeded"),
            failed=get("failed"),
            dead=get("dead"),
            was_running=get("running"),
        )

    def save(self, cur: Cursor[Row], q: Queries) -> None:
        cur.execute(
            q["tenant_save"],
            {
                "id": self.id,
                "own_weight": self.own_weight,
                "own_max_running": self.own_max_running,
                "weight": self.weight,
                "max_running": self.max_running,
                "finish_tag": self.finish,
                "start_tag": self.start,
                "ready": self.ready,
                "scheduled": self.scheduled,
                "running": self.running,
                "was_running": self.was_running,
                "succeeded": self.succeeded,
                "failed": self.failed,
                "dead": self.dead,
            },
        )
        if cur.fetchone() is None:
            raise RuntimeError(
                f"tenant {self.tenant!r} in queue {self.queue!r}: slot update refused "
                f"(running {self.was_running} -> {self.running}, cap {self.max_running}); "
                "this is a bug in fairq, please report it"
            )
        self.was_running = self.running

    def stats(self, oldest_ready_at: float | None) -> TenantStats:
        return TenantStats(
            queue=self.queue,
            tenant=self.tenant,
            weight=self.weight,
            max_running=self.max_running,
            ready=self.ready,
            scheduled=self.scheduled,
            running=self.running,
            succeeded=self.succeeded,
            failed=self.failed,
            dead=self.dead,
            oldest_ready_at=oldest_ready_at,
        )


@dataclass
class JobRow:
    seq: int
    id: str
    tenant_id: int
    queue: str
    tenant: str
    name: str
    state: JobState
    payload: str
    priority: int
    attempts: int
    max_attempts: int
    lease_timeout: float
    cost: float
    enqueued_at: float
    run_at: float
    ready_at: float | None
    started_at: float | None
    deadline: float | None
    finished_at: float | None
    last_error: str | None
    worker_id: str | None

    @classmethod
    def from_row(cls, row: Row) -> JobRow:
        return cls(
            seq=row["seq"],
            id=row["id"],
            tenant_id=row["tenant_id"],
            queue=row["queue"],
            tenant=row["tenant"],
            name=row["name"],
            state=JobState(row["state"]),
            payload=row["payload"],
            priority=row["priority"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            lease_timeout=row["lease_timeout"],
            cost=row["cost"],
            enqueued_at=row["enqueued_at"],
            run_at=row["run_at"],
            ready_at=row["ready_at"],
            started_at=row["started_at"],
            deadline=row["deadline"],
            finished_at=row["finished_at"],
            last_error=row["last_error"],
            worker_id=row["worker_id"],
        )

    def save(self, cur: Cursor[Row], q: Queries) -> None:
        cur.execute(
            q["job_save"],
            {
                "seq": self.seq,
                "state": self.state.value,
                "attempts": self.attempts,
                "run_at": self.run_at,
                "ready_at": self.ready_at,
                "started_at": self.started_at,
                "deadline": self.deadline,
                "finished_at": self.finished_at,
                "last_error": self.last_error,
                "worker_id": self.worker_id,
            },
        )

    def info(self) -> JobInfo:
        return JobInfo(
            id=self.id,
            name=self.name,
            queue=self.queue,
            tenant=self.tenant,
            state=self.state,
            payload=self.payload,
            priority=self.priority,
            attempts=self.attempts,
            max_attempts=self.max_attempts,
            enqueued_at=self.enqueued_at,
            run_at=self.run_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            deadline=self.deadline if self.state is JobState.RUNNING else None,
            last_error=self.last_error,
        )

    def lease(self) -> Lease:
        assert self.started_at is not None and self.deadline is not None
        return Lease(
            token=lease_token(self.id, self.attempts),
            job_id=self.id,
            name=self.name,
            queue=self.queue,
            tenant=self.tenant,
            payload=self.payload,
            attempt=self.attempts,
            max_attempts=self.max_attempts,
            started_at=self.started_at,
            deadline=self.deadline,
            lease_timeout=self.lease_timeout,
            cost=self.cost,
        )
