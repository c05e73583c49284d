"""Turning what the Lua functions store and return into fairq's records, and values into ARGV.

Jobs and tenants are stored as binary records (``tenant_record`` in _lib.lua, ``job_record``
in _lib_jobs.lua): a 2-byte mask of the optional fields present (and of a job's flags), the
fixed fields, then the present optional fields, packed with Lua's ``struct`` and read here
with Python's: doubles travel bit for bit. A running job's name follows its record (read here
from its body). Values sent to Lua use ``repr``, which Lua's ``tonumber`` reads back exactly.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from fairq.contract import JobCost, TenantStats
from fairq.errors import SchemaError
from fairq.job import JobInfo, JobState, Lease, decode_headers, lease_token
from fairq.policy import history
from fairq.policy.rate import Rate

from .keys import LAYOUT, SEQ_WIDTH, TID_WIDTH

_STATES = {
    "s": JobState.SCHEDULED,
    "r": JobState.READY,
    "R": JobState.RUNNING,
    "S": JobState.SUCCEEDED,
    "d": JobState.DEAD,
    "c": JobState.CANCELLED,
}


def num(value: float) -> str:
    """A float as ARGV text that Lua reads back to the same double."""
    return repr(float(value))


def text(raw: bytes | str) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


def _opt(field: str) -> float | None:
    return float(field) if field else None


#: Python struct codes of the stored records, in the order of _lib.lua's record formats
#: (`tenant_record`, `job_record`).
JOB_FIXED = "cdIidddddddd"
JOB_OPTIONAL = ("d", "d", "d", "d", "d", "d")
#: The job's flags, the mask's bits after JOB_OPTIONAL's, each set for the exception (a record
#: an older fairq wrote has neither): declared learn_cost=False, and a relayed job's run not
#: started yet (FIXED_COST and UNCLAIMED in _lib_jobs.lua).
JOB_FLAGS = ("fixed_cost", "unclaimed")
TENANT_FIXED = "dIIIdddddI"
TENANT_OPTIONAL = ("d", "d", "d", "16s", "d", "d", "d", "d", "d", "I")

OLD_LAYOUT = (
    "this Redis holds fairq records in another layout (an older fairq stored them as text, "
    "or in an earlier binary layout); "
    "this fairq reads layout {layout} only. Delete the old keys (fairq is unreleased, so no "
    "migration is offered) or use another key prefix (?prefix=… in the URL) or database"
)


@cache
def _format(fixed: str, optional: tuple[str, ...], mask: int) -> str:
    present = "".join(code for i, code in enumerate(optional) if mask >> i & 1)
    return ">H" + fixed + present


def unpack_record(
    raw: bytes, fixed: str, optional: tuple[str, ...], flags: int = 0
) -> tuple[tuple[Any, ...], list[Any]]:
    """The fixed fields and the optional ones (None when absent) of a binary record; with
    ``flags``, a job's: its flags (``job_flags``) may be set, and bytes may follow (its name)."""
    mask = int.from_bytes(raw[:2], "big")
    if mask >> (len(optional) + flags):
        raise SchemaError(OLD_LAYOUT.format(layout=LAYOUT))
    form = _format(fixed, optional, mask & ((1 << len(optional)) - 1))
    try:
        values = struct.unpack_from(form, raw) if flags else struct.unpack(form, raw)
    except struct.error:
        raise SchemaError(OLD_LAYOUT.format(layout=LAYOUT)) from None
    rest = iter(values[1 + len(fixed) :])
    present = [next(rest) if mask >> i & 1 else None for i in range(len(optional))]
    return values[1 : 1 + len(fixed)], present


def job_flags(raw: bytes) -> dict[str, bool]:
    """Which of JOB_FLAGS a job record has set."""
    mask = int.from_bytes(raw[:2], "big") >> len(JOB_OPTIONAL)
    return {flag: bool(mask >> i & 1) for i, flag in enumerate(JOB_FLAGS)}


def unpack_job(raw: bytes) -> tuple[tuple[Any, ...], list[Any]]:
    return unpack_record(raw, JOB_FIXED, JOB_OPTIONAL, len(JOB_FLAGS))


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


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


def encode_body(name: str, payload: str, headers: str | None = None) -> bytes:
    """A job's name, payload and headers (``encode_headers``'s text) in one value that Lua only
    reads the name of: ``len:name payload``, after ``h len:headers`` when there are headers (a
    body without them starts with a digit, so both read back unambiguously)."""
    encoded = name.encode("utf-8")
    body = str(len(encoded)).encode() + b":" + encoded + payload.encode("utf-8")
    if headers:
        text = headers.encode("utf-8")
        body = b"h" + str(len(text)).encode() + b":" + text + body
    return body


def decode_body(raw: bytes) -> tuple[str, str, str | None]:
    """The name, payload and headers text (None: none) of a body (``encode_body``)."""
    headers = None
    if raw[:1] == b"h":
        size, _, rest = raw[1:].partition(b":")
        length = int(size)
        headers, raw = rest[:length].decode("utf-8"), rest[length:]
    size, _, rest = raw.partition(b":")
    length = int(size)
    return rest[:length].decode("utf-8"), rest[length:].decode("utf-8"), headers


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
    cancel_at: float | None = None  # when a running job was asked to stop (fairq/cancel.py)
    result_until: float | None = None  # when its kept result expires (fairq/results.py)
    learn_cost: bool = True  # False: always charged ``cost`` (fairq/policy/cost.py)
    claimed: bool = True  # False: a relayed job no worker claimed yet (DequeueParams.hold)

    @classmethod
    def parse(cls, raw: bytes) -> JobRecord:
        fixed, optional = unpack_job(raw)
        flags = job_flags(raw)
        ready_at, started_at, deadline, finished_at, cancel_at, result_until = optional
        state, seq, tid, priority, max_attempts, attempts, leases, *times = fixed
        enqueued_at, run_at, lease_timeout, cost, charged = times
        return cls(
            seq=int(seq),
            tid=tid,
            state=_STATES[state.decode()],
            priority=priority,
            enqueued_at=enqueued_at,
            run_at=run_at,
            ready_at=ready_at,
            max_attempts=int(max_attempts),
            lease_timeout=lease_timeout,
            cost=cost,
            attempts=int(attempts),
            started_at=started_at,
            deadline=deadline,
            finished_at=finished_at,
            leases=int(leases),
            charged=charged,
            cancel_at=cancel_at,
            result_until=result_until,
            learn_cost=not flags["fixed_cost"],
            claimed=not flags["unclaimed"],
        )


def job_info(
    job_id: str,
    queue: str,
    record: JobRecord,
    body: bytes,
    tenant: str,
    error: str | None,
    result: bytes | None = None,
) -> JobInfo:
    name, payload, headers = decode_body(body)
    kept = result is not None and record.result_until is not None
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
        ready_at=record.ready_at,
        headers=decode_headers(headers),
        result=json.loads(result) if kept and result is not None else None,
        result_until=record.result_until if kept else None,
        cancel_requested=record.cancel_at is not None and record.state is JobState.RUNNING,
    )


def lease(job_id: str, queue: str, raw: bytes, body: bytes, tenant: str) -> Lease:
    """The lease of a job just dequeued, read from its stored record (``raw``) without building
    a ``JobRecord``: this runs for every job handed out, and that took over a third of it."""
    name, payload, headers = decode_body(body)
    fixed, (ready_at, started_at, deadline, *_) = unpack_job(raw)
    max_attempts, attempts, leases, _, _, lease_timeout, _, charged = fixed[4:]
    assert started_at is not None and deadline is not None and ready_at is not None
    return Lease(
        token=lease_token(job_id, int(leases)),
        job_id=job_id,
        name=name,
        queue=queue,
        tenant=tenant,
        payload=payload,
        attempt=int(attempts),
        max_attempts=int(max_attempts),
        started_at=started_at,
        deadline=deadline,
        lease_timeout=lease_timeout,
        cost=charged,  # the estimate charged at dispatch
        ready_at=ready_at,
        headers=decode_headers(headers),
    )


#: A learned cost's stored value (a ``costs`` field: COST_FORMAT in _lib_costs.lua).
COST_FORMAT = ">Hd"


def job_cost(queue: str, name: str, raw: bytes) -> JobCost:
    """A (queue, job name)'s learned cost from its ``costs`` field: runs, mean."""
    runs, mean = struct.unpack(COST_FORMAT, raw)
    return JobCost(queue=queue, name=name, runs=runs, estimate=mean)


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
    kept: int  # succeeded and cancelled jobs still stored
    weight: float | None
    max_running: int | None
    tat: float | None
    limited_until: float | None
    usage: float
    usage_at: float
    rate: Rate | None  # own setting; None: the queue's default
    cancelled: int = 0  # lifetime

    @classmethod
    def parse(cls, raw: bytes) -> TenantRecord:
        fixed, optional = unpack_record(raw, TENANT_FIXED, TENANT_OPTIONAL)
        finish, ready, scheduled, running, succeeded, failed, dead, usage, usage_at, kept = fixed
        start, weight, cap, _eseq, tat, limited, count, period, burst, cancelled = optional
        return cls(
            finish=finish,
            start=start,
            ready=ready,
            scheduled=scheduled,
            running=running,
            succeeded=int(succeeded),
            failed=int(failed),
            dead=int(dead),
            kept=kept,
            weight=weight,
            max_running=_int(cap),
            tat=tat,
            limited_until=limited,
            usage=usage,
            usage_at=usage_at,
            rate=None if count is None else Rate(int(count), period, int(burst)),
            cancelled=int(cancelled or 0),
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
            cancelled=self.cancelled,
        )


#: The ``meta`` fields that hold a queue's defaults, in ``QueueDefaults.parse`` order.
META_FIELDS = ("weight", "cap", "rcount", "rperiod", "rburst", "half_life", "max_debt", "maxf")


@dataclass(frozen=True)
class QueueDefaults:
    """A queue's stored defaults (the ``meta`` hash)."""

    weight: float
    cap: int | None
    rate: Rate | None
    half_life: float | None
    max_debt: float
    max_in_flight: int | None = None  # the queue's own cap on its leased jobs

    @classmethod
    def parse(cls, fields: list[bytes | None]) -> QueueDefaults:
        f = [text(v) if v is not None else "" for v in fields]
        return cls(
            weight=float(f[0]) if f[0] else 1.0,
            cap=int(f[1]) if f[1] else None,
            rate=rate_from(f[2], f[3], f[4]),
            half_life=_opt(f[5]),
            max_debt=float(f[6]) if f[6] else 60.0,
            max_in_flight=int(f[7]) if len(f) > 7 and f[7] else None,
        )

    def usage_half_life(self) -> float:
        return history.usage_half_life(self.half_life)


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
