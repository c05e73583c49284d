"""The job record as every layer sees it, and its JSON payload (never pickle)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, TypeVar

from fairq.errors import (
    ConfigError,
    DuplicateJob,
    JobArgumentsError,
    JobHeadersError,
    LeaseExpired,
    LeaseNotFound,
    PayloadTooLarge,
)
from fairq.policy.bounds import MAX_INT, check_int, check_seconds, check_tenant
from fairq.policy.queues import check_queue_name
from fairq.policy.throttle import Throttle
from fairq.policy.unique import check_key

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
#: The most a job's headers may take, as compact UTF-8 JSON: they travel with every lease.
MAX_HEADERS_BYTES = 4096
#: How deep job arguments may nest: JSON readers (the worker's among them) recurse per level.
MAX_NESTING = 200


class JobState(str, Enum):
    """Where a job is in its life. See docs/internals/states.md for the diagram."""

    SCHEDULED = "scheduled"  # waiting for its run-at time (a delay, or a retry's back-off)
    READY = "ready"  # in its tenant's FIFO, waiting for the scheduler
    RUNNING = "running"  # held by a worker under a lease
    SUCCEEDED = "succeeded"
    DEAD = "dead"  # out of attempts; kept until re-queued or deleted
    CANCELLED = "cancelled"  # cancelled on request (``App.cancel``); never runs again

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True)
class Unique:
    """A job's unique key (fairq/policy/unique.py, docs/unique.md): while it holds, an
    enqueue with the same key in the same queue and tenant stores nothing and gets the id of
    the job that took it.

    ``window``: seconds the key may hold at most, from the enqueue that took it. ``hold``:
    the key holds for its whole window, even once its job ended (a periodic job's tick, so a
    late scheduler never enqueues that tick again); otherwise only while its job is
    scheduled, ready or running.
    """

    key: str
    window: float
    hold: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", check_key(self.key))
        object.__setattr__(self, "window", check_seconds("unique_for", self.window))
        if not isinstance(self.hold, bool):
            raise ConfigError(f"hold must be True or False, got {self.hold!r}")


@dataclass(frozen=True, kw_only=True)
class NewJob:
    """A job as handed to a store by enqueue. Times are absolute (seconds since the epoch)."""

    id: str
    name: str
    queue: str
    tenant: str
    payload: str
    priority: int = 0
    run_at: float
    max_attempts: int
    lease_timeout: float
    #: Seconds of work the job is expected to take: the estimate charged when it is handed
    #: out until its (queue, name) has a measured run (fairq.policy.cost), or always when
    #: ``learn_cost`` is False.
    cost: float
    learn_cost: bool = True
    #: Re-routing rules, given only when the job is headed for its declared queue.
    throttle: Sequence[Throttle] = ()
    #: Small str metadata that travels with the job to every lease (a trace context, …).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The tenant's shards of a sharded queue, best first (fairq.policy.shards): the store
    #: puts the job in the least loaded of them (``least_loaded``), not in ``queue``.
    shards: Sequence[str] = ()
    #: Its unique key, if it has one: the store keeps it in ``queue`` (as given here, before
    #: any choice of shard) and ``tenant``.
    unique: Unique | None = None

    def __post_init__(self) -> None:
        """Refuse what some store cannot hold, before any store sees it (fairq.policy.bounds)."""
        check_tenant(self.tenant)
        if self.unique is not None and self.throttle:
            raise ConfigError(
                f"job {self.id!r}: a job with a unique key takes no throttle rules (a rule may "
                "move it to another queue, where its key is not kept)"
            )
        if self.shards:
            if isinstance(self.shards, str) or self.throttle:
                raise ConfigError(
                    f"job {self.id!r}: shards must be a list of shard queues, and a sharded "
                    "job takes no throttle rules"
                )
            object.__setattr__(self, "shards", tuple(map(check_queue_name, self.shards)))
        object.__setattr__(self, "headers", check_headers(self.headers))
        check_int("priority", self.priority, least=-MAX_INT - 1)
        check_int("max_attempts", self.max_attempts)
        check_seconds("lease", self.lease_timeout)
        check_seconds("cost", self.cost)
        if not isinstance(self.learn_cost, bool):
            raise ConfigError(f"learn_cost must be True or False, got {self.learn_cost!r}")
        if not math.isfinite(self.run_at):
            raise ConfigError(f"run_at must be a finite time, got {self.run_at!r}")


class StoredJob(Protocol):
    """A job as a store keeps it (the model's record, a SQL row): what a ``Lease`` and a
    ``JobInfo`` are made from."""

    id: str
    name: str
    queue: str
    tenant: str
    state: JobState
    payload: str
    priority: int
    attempts: int
    leases: int  # dispatches so far: names the current lease
    max_attempts: int
    lease_timeout: float
    cost: float  # as declared (fairq.policy.cost)
    learn_cost: bool  # False: always charged ``cost``, never the learned estimate
    charged: float  # what the current run has been charged so far: the estimate at dispatch
    claimed: bool  # its run has started: a relayed job's is not until a worker claims it
    enqueued_at: float
    run_at: float
    ready_at: float | None  # when it last became ready; None: never ready yet
    started_at: float | None
    deadline: float | None
    finished_at: float | None
    last_error: str | None
    headers: str | None  # as stored: ``encode_headers``'s JSON text, None for no headers
    progress: str | None  # as stored: ``Progress.encode``'s JSON text, None: no checkpoint yet
    result: str | None  # as stored: the return value's JSON text (fairq.results); None: none
    result_until: float | None  # when that result (and the job with it) is deleted
    cancel_requested: bool  # a running job asked to stop (``App.cancel``)


@dataclass(frozen=True, kw_only=True)
class Progress:
    """How far an iterative job got (``App.iterative_job``), as its last checkpoint stored it.

    ``cursor`` is the JSON value the job yielded last: where it resumes. ``items`` counts the
    cursors yielded over all its runs, ``slices`` the runs it handed back because its time
    slice was used up (or its worker stopped).
    """

    cursor: Any
    items: int = 0
    slices: int = 0

    def encode(self) -> str:
        """Compact JSON text, as stores keep it. ValueError/TypeError when the cursor is not
        JSON (the worker names the job and the value's type)."""
        return _dumps({"cursor": self.cursor, "items": self.items, "slices": self.slices})

    @classmethod
    def decode(cls, text: str | None) -> Progress | None:
        if not text:
            return None
        found = json.loads(text)
        return cls(cursor=found["cursor"], items=found["items"], slices=found["slices"])


@dataclass(frozen=True, kw_only=True)
class Lease:
    """A job handed to a worker. ``token`` is the proof of ownership for ack/fail/heartbeat."""

    token: str
    job_id: str
    name: str
    queue: str
    tenant: str
    payload: str
    attempt: int
    max_attempts: int
    started_at: float
    deadline: float
    lease_timeout: float
    #: The estimate its tenant was charged when it was handed out (fairq.policy.cost): the
    #: learned run time of its (queue, name), or its declared cost.
    cost: float
    #: When the job became ready for this run (its run_at, or when its retry or hand-back
    #: became due): ``started_at - ready_at`` is how long it waited for a worker.
    ready_at: float
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, job: StoredJob) -> Lease:
        """The lease a running job is held under."""
        assert job.started_at is not None and job.deadline is not None
        assert job.ready_at is not None
        return cls(
            token=lease_token(job.id, job.leases),
            job_id=job.id,
            name=job.name,
            queue=job.queue,
            tenant=job.tenant,
            payload=job.payload,
            attempt=job.attempts,
            max_attempts=job.max_attempts,
            started_at=job.started_at,
            deadline=job.deadline,
            lease_timeout=job.lease_timeout,
            cost=job.charged,
            ready_at=job.ready_at,
            headers=decode_headers(job.headers),
        )


@dataclass(frozen=True, kw_only=True)
class JobInfo:
    """Everything a store knows about one job, for inspection."""

    id: str
    name: str
    queue: str
    tenant: str
    state: JobState
    payload: str
    priority: int
    attempts: int
    max_attempts: int
    enqueued_at: float
    run_at: float
    started_at: float | None
    finished_at: float | None
    deadline: float | None
    last_error: str | None
    ready_at: float | None = None  # when it last became ready; None: never ready yet
    headers: Mapping[str, str] = field(default_factory=dict)
    #: An iterative job's last checkpoint (None: none yet, or not iterative). Kept while the
    #: job is unfinished; once it succeeded a store may drop it (PostgreSQL does).
    progress: Progress | None = None
    #: The return value of a job declared with ``result_ttl`` (a JSON value), once it succeeded;
    #: ``result_until`` says until when it is kept (None: no result is kept).
    result: Any = None
    result_until: float | None = None
    #: A running job was asked to stop (``App.cancel``); it ends ``cancelled`` unless it
    #: finishes first.
    cancel_requested: bool = False

    @classmethod
    def of(cls, job: StoredJob) -> JobInfo:
        """A stored job as inspection shows it: a deadline only while it runs."""
        return cls(
            id=job.id,
            name=job.name,
            queue=job.queue,
            tenant=job.tenant,
            state=job.state,
            payload=job.payload,
            priority=job.priority,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            enqueued_at=job.enqueued_at,
            run_at=job.run_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            deadline=job.deadline if job.state is JobState.RUNNING else None,
            last_error=job.last_error,
            ready_at=job.ready_at,
            headers=decode_headers(job.headers),
            progress=Progress.decode(job.progress),
            result=None if job.result is None else json.loads(job.result),
            result_until=job.result_until if job.result is not None else None,
            cancel_requested=bool(job.cancel_requested) and job.state is JobState.RUNNING,
        )


J = TypeVar("J")


def held_leases(
    tokens: Iterable[str], held: Callable[[str], J], lost: list[str]
) -> Iterator[tuple[str, J]]:
    """The batch calls' loop (ack_many, heartbeat): each token with its held job, in order,
    looked up only when reached (an earlier token of the batch may have ended it); tokens
    whose lease is lost or unknown go to ``lost`` instead."""
    for token in tokens:
        try:
            job = held(token)
        except (LeaseExpired, LeaseNotFound):
            lost.append(token)
            continue
        yield token, job


def check_distinct(jobs: Sequence[NewJob]) -> None:
    """DuplicateJob when one batch names a job id twice (stores check it before writing)."""
    ids = Counter(job.id for job in jobs)
    repeated = sorted(job_id for job_id, count in ids.items() if count > 1)
    if repeated:
        raise DuplicateJob(f"job ids repeated in one batch: {repeated}; nothing was stored")


def check_headers(headers: object) -> dict[str, str]:
    """A job's headers as a plain dict, or JobHeadersError naming what is wrong and the fix."""
    if not isinstance(headers, Mapping):
        raise JobHeadersError(
            f"headers must be a mapping of str to str, got {type(headers).__name__}"
        )
    found = dict(headers)
    for key, value in found.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise JobHeadersError(
                f"header {key!r}: {value!r} is not str to str; headers are text metadata "
                "(put other data in the job's arguments)"
            )
    try:
        size = len((encode_headers(found) or "").encode())
    except UnicodeEncodeError:
        raise JobHeadersError(
            "headers hold a lone surrogate, which is not valid Unicode; encode them properly"
        ) from None
    if size > MAX_HEADERS_BYTES:
        raise JobHeadersError(
            f"headers are {size} bytes of JSON, over the limit of {MAX_HEADERS_BYTES}; keep "
            "them to small metadata such as a trace context, and put data in the arguments"
        )
    return found


def encode_headers(headers: Mapping[str, str]) -> str | None:
    """Headers as stored: compact JSON text, or None when there are none (stores keep no
    bytes for the common case)."""
    if not headers:
        return None
    text = _dumps(dict(headers))
    text.encode()  # a lone surrogate raises here, not in a store
    return text


def decode_headers(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    found = json.loads(text)
    assert isinstance(found, dict)
    return found


def lease_token(job_id: str, lease_number: int) -> str:
    """A lease is named by its job and how many leases the job has had, never reused, so a
    stale lease (even one handed back by ``release``) can never match a new one."""
    return f"{job_id}:{lease_number}"


def encode_payload(
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> str:
    """Serialise a call's arguments as JSON, naming the first argument that cannot be stored.

    Refused, not rewritten: a dict key that is not a str (``json`` would store ``1`` as
    ``"1"``), nesting deeper than ``MAX_NESTING``, a lone surrogate, NaN, anything not JSON.
    """
    for key in kwargs:
        if not isinstance(key, str):
            raise JobArgumentsError(f"keyword argument names must be str, got {key!r}")
    _check_shapes(args, kwargs)
    try:
        text = _dumps({"args": list(args), "kwargs": dict(kwargs)})
        size = len(text.encode())
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        _raise_for_bad_argument(args, kwargs)
        raise  # pragma: no cover - _raise_for_bad_argument always raises
    if size > max_bytes:
        raise PayloadTooLarge(
            f"job arguments are {size} bytes of JSON, over the limit of {max_bytes} bytes; "
            "store large data elsewhere and pass a reference, or raise App(max_payload_bytes=…)"
        )
    return text


def decode_payload(payload: str) -> tuple[list[Any], dict[str, Any]]:
    data = json.loads(payload)
    return list(data["args"]), dict(data["kwargs"])


#: ``json.dumps(value, ensure_ascii=False, …)`` without building an encoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _labelled(args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    named = [(f"positional argument {i}", v) for i, v in enumerate(args)]
    return named + [(f"argument {k!r}", v) for k, v in kwargs.items()]


def _check_shapes(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Refuse containers JSON would silently change or cannot nest (a cheap walk: containers
    only, and none at all for calls of plain values)."""
    containers = (dict, list, tuple)
    if not any(isinstance(v, containers) for v in (*args, *kwargs.values())):
        return
    for label, value in _labelled(args, kwargs):
        problem = _shape_problem(value) if isinstance(value, containers) else None
        if problem is not None:
            raise JobArgumentsError(f"{label} cannot be stored as JSON: it {problem}")


def _shape_problem(value: Any) -> str | None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            return (
                f"is nested more than {MAX_NESTING} levels deep (or contains itself); "
                "flatten it, or store it elsewhere and pass a reference"
            )
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    changed = isinstance(key, (int, float)) or key is None
                    became = f", so it would come back as {json.dumps(key)!r}" if changed else ""
                    return (
                        f"has a dict key {key!r} of type {type(key).__name__}; JSON object keys "
                        f"are str{became}: use str keys"
                    )
            children: Iterable[Any] = item.values()
        else:
            children = item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list, tuple)))
    return None


def _raise_for_bad_argument(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    for label, value in _labelled(args, kwargs):
        try:
            _dumps(value).encode()
            label.encode()
        except UnicodeEncodeError as exc:
            raise JobArgumentsError(
                f"{label.encode(errors='backslashreplace').decode()} cannot be stored: it holds "
                f"{exc.object[exc.start : exc.end]!a}, a lone surrogate, which is not valid "
                "Unicode (often text decoded with errors='surrogateescape'); encode it properly"
            ) from None
        except (TypeError, ValueError) as exc:
            kind = type(value).__name__
            if isinstance(value, float) and not math.isfinite(value):
                kind = f"non-finite float {value}"
            raise JobArgumentsError(
                f"{label} cannot be stored as JSON ({kind}: {exc}); job arguments must be "
                "JSON values: str, int, finite float, bool, None, lists and dicts with str keys"
            ) from exc
    raise JobArgumentsError("job arguments cannot be stored as JSON")
