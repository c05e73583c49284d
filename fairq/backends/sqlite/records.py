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
from fairq.job import JobInfo, JobState, Lease
from fairq.policy import history
from fairq.policy.rate import Rate
from fairq.policy.tenant import SettledQueue


def rate_from(row: sqlite3.Row, prefix: str) -> Rate | None:
    """A rate stored in three columns (``{prefix}count``, ``period``, ``burst``); NULL: none."""
    count = row[f"{prefix}count"]
    if count is None:
        return None
    return Rate(count, row[f"{prefix}period"], row[f"{prefix}burst"])


def rate_columns(rate: Rate | None, prefix: str) -> dict[str, object]:
    return {
        f"{prefix}count": None if rate is None else rate.count,
        f"{prefix}period": None if rate is None else rate.period,
        f"{prefix}burst": None if rate is None else rate.burst,
    }


@dataclass
class QueueRow(SettledQueue):
    """A queue's defaults and its virtual clock V."""

    name: str
    weight: float
    max_running: int | None
    vclock: float
    rate: Rate | None
    half_life: float | None
    max_debt: float
    max_in_flight: int | None  # the queue's cap on leased jobs; None: no cap

    @classmethod
    def load(cls, db: sqlite3.Connection, name: str) -> QueueRow | None:
        row = db.execute(Q["queue_get"], {"name": name}).fetchone()
        if row is None:
            return None
        return cls(
            name=row["name"],
            weight=row["weight"],
            max_running=row["max_running"],
            vclock=row["vclock"],
            rate=rate_from(row, "rate_"),
            half_life=row["half_life"],
            max_debt=row["max_debt"],
            max_in_flight=row["max_in_flight"],
        )

    @classmethod
    def get(cls, db: sqlite3.Connection, name: str) -> QueueRow:
        """A queue that must exist: every tenant row's queue does."""
        found = cls.load(db, name)
        assert found is not None, name
        return found

    def usage_half_life(self) -> float:
        """Recent usage decays with the queue's half-life, or the default one for display."""
        return history.usage_half_life(self.half_life)

    def save_vclock(self, db: sqlite3.Connection) -> None:
        db.execute(Q["queue_set_vclock"], {"name": self.name, "vclock": self.vclock})


@dataclass
class TenantRow:
    id: int
    queue: str
    tenant: str
    own_weight: float | None
    own_max_running: int | None
    own_rate: Rate | None
    weight: float  # effective: own setting, else the queue's default; 0: paused
    max_running: int | None  # effective
    rate: Rate | None  # effective
    tat: float | None  # GCRA theoretical arrival time
    limited_until: float | None  # set while waiting on its rate limit
    usage: float  # recent service, decaying (policy.history)
    usage_at: float
    finish: float
    start: float | None
    head_seq: int | None
    ready: int
    scheduled: int
    running: int
    succeeded: int
    failed: int
    dead: int
    kept: int  # succeeded and cancelled jobs still stored
    cancelled: int  # lifetime

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
            own_rate=rate_from(row, "own_rate_"),
            weight=row["weight"],
            max_running=row["max_running"],
            rate=rate_from(row, "rate_"),
            tat=row["tat"],
            limited_until=row["limited_until"],
            usage=row["usage"],
            usage_at=row["usage_at"],
            finish=row["finish_tag"],
            start=row["start_tag"],
            head_seq=row["head_seq"],
            ready=row["ready"],
            scheduled=row["scheduled"],
            running=row["running"],
            succeeded=row["succeeded"],
            failed=row["failed"],
            dead=row["dead"],
            kept=row["kept"],
            cancelled=row["cancelled"],
        )

    def save(self, db: sqlite3.Connection) -> None:
        db.execute(
            Q["tenant_save"],
            {
                "id": self.id,
                "own_weight": self.own_weight,
                "own_max_running": self.own_max_running,
                **rate_columns(self.own_rate, "own_rate_"),
                "weight": self.weight,
                "max_running": self.max_running,
                **rate_columns(self.rate, "rate_"),
                "tat": self.tat,
                "limited_until": self.limited_until,
                "usage": self.usage,
                "usage_at": self.usage_at,
                "finish_tag": self.finish,
                "start_tag": self.start,
                "head_seq": self.head_seq,
                "ready": self.ready,
                "scheduled": self.scheduled,
                "running": self.running,
                "succeeded": self.succeeded,
                "failed": self.failed,
                "dead": self.dead,
                "kept": self.kept,
                "cancelled": self.cancelled,
            },
        )

    def own_settings(self) -> bool:
        own = (self.own_weight, self.own_max_running, self.own_rate)
        return any(setting is not None for setting in own)

    def stats(self, oldest_ready_at: float | None, usage: float) -> TenantStats:
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
            rate=self.rate,
            limited_until=self.limited_until,
            usage=usage,
            cancelled=self.cancelled,
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
    leases: int  # dispatches so far, never decremented: names the current lease
    charged: float  # what the current run has been charged to its tenant so far
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
    headers: str | None  # as stored (fairq.job.encode_headers)
    progress: str | None  # as stored (fairq.job.Progress.encode); written by checkpoint only
    result: str | None  # the kept return value (fairq.results); written by ack only
    result_until: float | None
    cancel_requested: bool  # written by cancel only (fairq/backends/sqlite/cancelling.py)
    learn_cost: bool  # False: always charged ``cost`` (fairq.policy.cost)
    claimed: bool  # its run started: at dispatch, or for a relayed job at its claim

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
        for flag in ("cancel_requested", "learn_cost", "claimed"):
            fields[flag] = bool(fields[flag])
        return cls(**fields)

    def save(self, db: sqlite3.Connection) -> None:
        db.execute(
            Q["job_save"],
            {
                "seq": self.seq,
                "state": self.state.value,
                "attempts": self.attempts,
                "leases": self.leases,
                "charged": self.charged,
                "run_at": self.run_at,
                "ready_at": self.ready_at,
                "started_at": self.started_at,
                "deadline": self.deadline,
                "finished_at": self.finished_at,
                "last_error": self.last_error,
                "worker_id": self.worker_id,
                "claimed": self.claimed,
            },
        )

    def info(self) -> JobInfo:
        return JobInfo.of(self)

    def lease(self) -> Lease:
        return Lease.of(self)
