"""Turning what the scripts store and return into fairq's records, and values into ARGV.

A job is stored as one comma-separated record of numbers (see _lib.lua); floats are written
with ``%.17g``, so ``float()`` reads back the very double Lua computed. Values sent to Lua use
``repr``, which Lua's ``tonumber`` also reads back exactly.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from fairq.contract import TenantStats
from fairq.job import JobInfo, JobState, Lease, lease_token
from fairq.policy import history
from fairq.policy.rate import Rate

from .keys import SEQ_WIDTH, TID_WIDTH

_STATES = {
    "s": JobState.SCHEDULED,
    "r": JobState.READY,
    "R": JobState.RUNNING,
    "S": JobState.SUCCEEDED,
    "d": JobState.DEAD,
}


def num(value: float) -> str:
    """A float as ARGV text that Lua reads back to the same double."""
    return repr(float(value))


def text(raw: bytes | str) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


def _opt(field: str) -> float | None:
    return float(field) if field else None


def rate_from(count: str, period: str, burst: str) -> Rate | None:
    """A rate from its three stored fields ('' for none)."""
    if not count:
        return None
    return Rate(int(count), float(period), int(burst))


def rate_arg(rate: Rate | None) -> str:
    """A rate as one ARGV value, ``count,period,burst`` ('' for none)."""
    if rate is None:
        return ""
    return f"{rate.count},{num(rate.period)},{rate.burst}"


def encode_body(name: str, payload: str) -> bytes:
    """A job's name and payload in one value that Lua never has to parse."""
    encoded = name.encode("utf-8")
    return str(len(encoded)).encode() + b":" + encoded + payload.encode("utf-8")


def decode_body(raw: bytes) -> tuple[str, str]:
    size, _, rest = raw.partition(b":")
    length = int(size)
    return rest[:length].decode("utf-8"), rest[length:].decode("utf-8")


@dataclass(frozen=True)
class JobRecord:
    """The numeric part of a stored job (the ``jobs`` hash value)."""

    seq: int
    tid: int
    state: JobState
    priority: int
    enqueued_at: float
    run_at: float
    ready_at: float | None
    max_attempts: int
    lease_timeout: float
    cost: float
    attempts: int
    started_at: float | None
    deadline: float | None
    finished_at: float | None
    leases: int  # dispatches so far: names the current lease
    charged: float  # seconds of the current run already charged to its tenant

    @classmethod
    def parse(cls, raw: bytes | str) -> JobRecord:
        f = text(raw).split(",")
        return cls(
            seq=int(f[0]),
            tid=int(f[1]),
            state=_STATES[f[2]],
            priority=int(f[3]),
            enqueued_at=float(f[4]),
            run_at=float(f[5]),
            ready_at=_opt(f[6]),
            max_attempts=int(f[7]),
            lease_timeout=float(f[8]),
            cost=float(f[9]),
            attempts=int(f[10]),
            started_at=_opt(f[11]),
            deadline=_opt(f[12]),
            finished_at=_opt(f[13]),
            # records from before leases/charged: the token named the attempt (see _lib_jobs.lua)
            leases=int(f[14]) if len(f) > 14 else int(f[10]),
            charged=float(f[15]) if len(f) > 15 else float(f[9]),
        )


def job_info(
    job_id: str, queue: str, record: JobRecord, body: bytes, tenant: str, error: str | None
) -> JobInfo:
    name, payload = decode_body(body)
    return JobInfo(
        id=job_id,
        name=name,
        queue=queue,
        tenant=tenant,
        state=record.state,
        payload=payload,
        priority=record.priority,
        attempts=record.attempts,
        max_attempts=record.max_attempts,
        enqueued_at=record.enqueued_at,
        run_at=record.run_at,
        started_at=record.started_at,
        finished_at=record.finished_at,
        deadline=record.deadline if record.state is JobState.RUNNING else None,
        last_error=error,
    )


def lease(job_id: str, queue: str, record: JobRecord, body: bytes, tenant: str) -> Lease:
    name, payload = decode_body(body)
    assert record.started_at is not None and record.deadline is not None
    return Lease(
        token=lease_token(job_id, record.leases),
        job_id=job_id,
        name=name,
        queue=queue,
        tenant=tenant,
        payload=payload,
        attempt=record.attempts,
        max_attempts=record.max_attempts,
        started_at=record.started_at,
        deadline=record.deadline,
        lease_timeout=record.lease_timeout,
        cost=record.cost,
    )


@dataclass(frozen=True)
class TenantRecord:
    """A tenant's stored state (the ``tenants`` hash value)."""

    finish: float
    start: float | None
    ready: int
    scheduled: int
    running: int
    succeeded: int
    failed: int
    dead: int
    weight: float | None
    max_running: int | None
    tat: float | None
    limited_until: float | None
    usage: float
    usage_at: float
    rate: Rate | None  # own setting; None: the queue's default

    @classmethod
    def parse(cls, raw: bytes | str) -> TenantRecord:
        f = text(raw).split(",")
        f += [""] * (18 - len(f))
        return cls(
            finish=float(f[0]),
            start=_opt(f[1]),
            ready=int(f[2]),
            scheduled=int(f[3]),
            running=int(f[4]),
            succeeded=int(f[5]),
            failed=int(f[6]),
            dead=int(f[7]),
            weight=_opt(f[8]),
            max_running=int(f[9]) if f[9] else None,
            tat=_opt(f[11]),
            limited_until=_opt(f[12]),
            usage=float(f[13] or 0.0),
            usage_at=float(f[14] or 0.0),
            rate=rate_from(f[15], f[16], f[17]),
        )

    def stats(
        self,
        queue: str,
        tenant: str,
        defaults: QueueDefaults,
        oldest: float | None,
        now: float | None,
    ) -> TenantStats:
        usage = self.usage
        if now is not None:
            usage = history.decayed(usage, self.usage_at, now, defaults.usage_half_life())
        return TenantStats(
            queue=queue,
            tenant=tenant,
            weight=self.weight if self.weight is not None else defaults.weight,
            max_running=self.max_running if self.max_running is not None else defaults.cap,
            ready=self.ready,
            scheduled=self.scheduled,
            running=self.running,
            succeeded=self.succeeded,
            failed=self.failed,
            dead=self.dead,
            oldest_ready_at=oldest,
            rate=self.rate if self.rate is not None else defaults.rate,
            limited_until=self.limited_until,
            usage=usage,
        )


#: The ``meta`` fields that hold a queue's defaults, in ``QueueDefaults.parse`` order.
META_FIELDS = ("weight", "cap", "rcount", "rperiod", "rburst", "half_life", "max_debt")


@dataclass(frozen=True)
class QueueDefaults:
    """A queue's stored defaults (the ``meta`` hash)."""

    weight: float
    cap: int | None
    rate: Rate | None
    half_life: float | None
    max_debt: float

    @classmethod
    def parse(cls, fields: list[bytes | None]) -> QueueDefaults:
        f = [text(v) if v is not None else "" for v in fields]
        return cls(
            weight=float(f[0]) if f[0] else 1.0,
            cap=int(f[1]) if f[1] else None,
            rate=rate_from(f[2], f[3], f[4]),
            half_life=_opt(f[5]),
            max_debt=float(f[6]) if f[6] else 60.0,
        )

    def usage_half_life(self) -> float:
        return history.usage_half_life(self.half_life)


def tid_prefix(tid: int) -> bytes:
    return str(tid).zfill(TID_WIDTH).encode()


def oldest_ready_at(member: bytes | None) -> float | None:
    """Decode the sortable ready_at of a ``readyat`` member (see ``sortable`` in _lib.lua)."""
    if not member:
        return None
    raw = bytearray(member[TID_WIDTH : TID_WIDTH + 8])
    if raw[0] >= 128:
        raw[0] -= 128
    else:
        raw = bytearray(255 - b for b in raw)
    value: float = struct.unpack(">d", bytes(raw))[0]
    return value


def member_job_id(member: bytes) -> str:
    """The job id of a ``seq(16) .. job_id`` member (scheduled, running, dead, done)."""
    return member[SEQ_WIDTH:].decode("utf-8")
