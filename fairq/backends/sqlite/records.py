"""Rows of ``jobs`` and ``tenants`` as mutable records, read and written whole.

An event loads the rows it touches, applies the rules in Python (the same functions the
reference model calls, so tags are bit-identical) and writes them back in the same
transaction. One ``save`` statement per table keeps the SQL small and obviously complete.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from fairq.backends.sqlite.sql import Q
from fairq.contract import TenantStats
from fairq.job import JobInfo, JobState, Lease, lease_token


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
    head_seq: int | None
    ready: int
    scheduled: int
    running: int
    succeeded: int
    failed: int
    dead: int

    @classmethod
    def load(cls, db: sqlite3.Connection, tenant_id: int) -> TenantRow:
        row = db.execute(Q["tenant_get"], {"id": tenant_id}).fetchone()
        return cls.from_row(row)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TenantRow:
        return cls(
            id=row["id"],
            queue=row["queue"],
            tenant=row["tenant"],
            own_weight=row["own_weight"],
            own_max_running=row["own_max_running"],
            weight=row["weight"],
            max_running=row["max_running"],
            finish=row["finish_tag"],
            start=row["start_tag"],
            head_seq=row["head_seq"],
            ready=row["ready"],
            scheduled=row["scheduled"],
            running=row["running"],
            succeeded=row["succeeded"],
            failed=row["failed"],
            dead=row["dead"],
        )

    def save(self, db: sqlite3.Connection) -> None:
        db.execute(
            Q["tenant_save"],
            {
                "id": self.id,
                "own_weight": self.own_weight,
                "own_max_running": self.own_max_running,
                "weight": self.weight,
                "max_running": self.max_running,
                "finish_tag": self.finish,
                "start_tag": self.start,
                "head_seq": self.head_seq,
                "ready": self.ready,
                "scheduled": self.scheduled,
                "running": self.running,
                "succeeded": self.succeeded,
                "failed": self.failed,
                "dead": self.dead,
            },
        )

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
    def by_seq(cls, db: sqlite3.Connection, seq: int) -> JobRow:
        return cls.from_row(db.execute(Q["job_by_seq"], {"seq": seq}).fetchone())

    @classmethod
    def by_id(cls, db: sqlite3.Connection, job_id: str) -> JobRow | None:
        row = db.execute(Q["job_by_id"], {"id": job_id}).fetchone()
        return None if row is None else cls.from_row(row)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JobRow:
        fields: dict[str, Any] = {key: row[key] for key in row.keys()}  # noqa: SIM118
        fields["state"] = JobState(fields["state"])
        return cls(**fields)

    def save(self, db: sqlite3.Connection) -> None:
        db.execute(
            Q["job_save"],
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
