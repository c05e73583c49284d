"""Rows of ``jobs`` and ``tenants`` as mutable records, read and written whole.

An event loads the rows it touches (locked, or covered by the exclusive queue lock), applies
the rules in Python with the very functions the reference model calls, so tags are
bit-identical, and writes them back in the same transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.steps import PgSteps, Sql, run
from fairq.job import JobInfo, JobState, Lease
from fairq.policy.rate import Rate
from fairq.policy.tenant import SettledQueue

Row = dict[str, Any]
#: Takes the shared locks of the queues named (in key order, queries/locks.sql) for the transaction
#: of the cursor given; returns the event's time once they are held (functions/clock.sql).
Lock = Callable[[Cursor[Row], Sequence[str], float], float]


def tenant_key(tenant: str) -> bytes:
    """The digest the tenants' unique index holds (tenant ids may be longer than an index entry)."""
    return hashlib.sha256(tenant.encode("utf-8")).digest()


@dataclass
class QueueRow(SettledQueue):
    """What the transitions (``fairq.policy.tenant``) read of a queue: its clock V and its
    history settings; and its cap on leased jobs, whose count only a capped queue keeps.
    Tenants' effective settings live on their rows."""

    vclock: float
    half_life: float | None
    max_debt: float
    max_in_flight: int | None = None

    @classmethod
    def from_row(cls, row: Row) -> QueueRow:
        return cls(
            vclock=row["vclock"],
            half_life=row["half_life"],
            max_debt=row["max_debt"],
            max_in_flight=row["max_in_flight"],
        )


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
    own_rate: Rate | None = None  # None: the queue's default
    rate: Rate | None = None  # effective
    tat: float | None = None  # GCRA theoretical arrival time
    limited_until: float | None = None  # set while waiting on its rate limit
    usage: float = 0.0  # recent service, decaying (fairq/policy/history.py)
    usage_at: float = 0.0
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
            own_rate=rate_of(get("own_rate_count"), get("own_rate_period"), get("own_rate_burst")),
            rate=rate_of(get("rate_count"), get("rate_period"), get("rate_burst")),
            tat=get("tat"),
            limited_until=get("limited_until"),
            usage=get("usage"),
            usage_at=get("usage_at"),
            was_running=get("running"),
        )

    def save(self, cur: Cursor[Row], q: Queries) -> None:
        run(cur, self.save_steps(q))

    def save_steps(self, q: Queries) -> PgSteps[None]:
        rows = yield Sql(
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
                **rate_columns("own_rate_", self.own_rate),
                **rate_columns("rate_", self.rate),
                "tat": self.tat,
                "limited_until": self.limited_until,
                "usage": self.usage,
                "usage_at": self.usage_at,
            },
        )
        if not rows:
            raise RuntimeError(
                f"tenant {self.tenant!r} in queue {self.queue!r}: slot update refused "
                f"(running {self.was_running} -> {self.running}, cap {self.max_running}); "
                "this is a bug in fairq, please report it"
            )
        self.was_running = self.running


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
    leases: int = 0  # dispatches so far; the lease token names the current one
    charged: float = 0.0  # what the current run has been charged so far
    headers: str | None = None  # as stored (fairq.job.encode_headers)
    progress: str | None = None  # as stored (fairq.job.Progress.encode); rows of functions lack it
    result: str | None = None  # the kept return value (fairq/results.py): succeeded_jobs only
    result_until: float | None = None
    cancel_requested: bool = False  # a running job asked to stop (fairq/cancel.py)
    learn_cost: bool = True  # False: always charged its cost (fairq/policy/cost.py)
    claimed: bool = True  # running: its run has started (a relayed job's at its claim)

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
            leases=row["leases"],
            charged=row["charged"],
            headers=row["headers"],
            progress=row.get("progress"),
            result=row.get("result"),
            result_until=row.get("result_until"),
            cancel_requested=row.get("cancel_requested") is not None,
            learn_cost=row["learn_cost"],
            claimed=row["claimed"],
        )

    def holds(self, lease: int) -> bool:
        """Running under lease number ``lease`` (the current one)."""
        return self.state is JobState.RUNNING and self.leases == lease

    def overdue(self, now: float) -> bool:
        return self.deadline is None or now >= self.deadline

    def save(self, cur: Cursor[Row], q: Queries) -> None:
        run(cur, self.save_steps(q))

    def save_steps(self, q: Queries) -> PgSteps[None]:
        yield Sql(
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
                "charged": self.charged,
                "claimed": self.claimed,
            },
        )

    def info(self) -> JobInfo:
        return JobInfo.of(self)

    def lease(self) -> Lease:
        return Lease.of(self)


def rate_of(count: int | None, period: float | None, burst: int | None) -> Rate | None:
    """A rate stored as three columns (all NULL: none)."""
    if count is None or period is None or burst is None:
        return None
    return Rate(count, period, burst)


def rate_columns(prefix: str, rate: Rate | None) -> dict[str, object]:
    return {
        prefix + "count": None if rate is None else rate.count,
        prefix + "period": None if rate is None else float(rate.period),
        prefix + "burst": None if rate is None else rate.burst,
    }
