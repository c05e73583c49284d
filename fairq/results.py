"""A job's return value, kept with its ack: ``@app.job(result_ttl=timedelta(hours=1))``.

The worker encodes the value as compact JSON (``encode_result``; never pickle) and hands it to
the store with the job's ack (``AckManyParams.results``), which keeps it with the succeeded job
for ``result_ttl``; then maintenance deletes the job and its result together, whatever the
worker's retention for other jobs. ``JobInfo.result`` shows it, ``App.result`` waits for it.

Waiting is a small loop over one store read (``settled``) with a growing pause between reads
(``POLL_FIRST`` doubling to ``POLL_MAX``): no store has a notification for a job's end, and a
poll every half second at most costs one indexed read per waiter. The loop's steps live here so
a sync and an async waiter share them (``App.result``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fairq.errors import JobFailed, NoResult, ResultError, ResultTooLarge
from fairq.job import JobInfo, JobState
from fairq.policy.bounds import check_seconds

#: The pause after the first read of a waiting ``App.result``, doubled after each read up to
#: ``POLL_MAX``: a result that comes at once is seen at once, a long job costs two reads a second.
POLL_FIRST = 0.01
POLL_MAX = 0.5


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """What an ack keeps with a succeeded job: ``value``, the return value as compact JSON text
    (``encode_result``), and ``keep``, the seconds it is kept after the ack."""

    value: str
    keep: float

    def __post_init__(self) -> None:
        if not isinstance(self.value, str):
            raise TypeError(f"a result's value must be its JSON text, got {self.value!r:.80}")
        object.__setattr__(self, "keep", check_seconds("result_ttl", self.keep))


def encode_result(value: Any, *, name: str, job_id: str, max_bytes: int) -> str:
    """The return value of job ``name`` (id ``job_id``) as compact JSON text; ResultError when
    it is not JSON, ResultTooLarge when it takes more than ``max_bytes``. Refused, never
    rewritten (as job arguments: fairq.job.encode_payload): a dict key that is not a str, NaN,
    a lone surrogate."""
    try:
        _check_keys(value)
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        size = len(text.encode())
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError too
        kind = type(value).__name__
        if isinstance(value, float) and not math.isfinite(value):
            kind = f"non-finite float {value}"
        raise ResultError(
            f"job {name!r} (id {job_id}) returned a {kind} that cannot be kept as JSON "
            f"({_cause(exc)}); a job declared with result_ttl must return str, int, finite "
            "float, bool, None, or lists and dicts (str keys) of them"
        ) from None
    if size > max_bytes:
        raise ResultTooLarge(
            f"job {name!r} (id {job_id}) returned {size} bytes of JSON, over the limit of "
            f"{max_bytes} bytes (App(max_payload_bytes=…)); keep large data elsewhere and "
            "return a reference to it"
        )
    return text


def _check_keys(value: Any) -> None:
    """TypeError for a dict key JSON would turn into text (1 would come back as "1")."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    raise TypeError(f"it holds a dict key {key!r} of type {type(key).__name__}")
            stack.extend(v for v in item.values() if isinstance(v, (dict, list, tuple)))
        elif isinstance(item, (list, tuple)):
            stack.extend(v for v in item if isinstance(v, (dict, list, tuple)))


def _cause(exc: BaseException) -> str:
    if isinstance(exc, UnicodeEncodeError):
        return "it holds a lone surrogate, which is not valid Unicode"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply, or contains itself"
    return str(exc)


def settled(info: JobInfo | None, job_id: str) -> tuple[bool, Any]:
    """One look at a job for ``App.result``: (True, its result) once it succeeded, (False,
    None) while it may still; NoResult or JobFailed when no result will ever come."""
    if info is None:
        raise NoResult(
            f"no job with id {job_id!r}: it was never enqueued in this store, or was deleted "
            "after its retention (a result is kept for its job's result_ttl)"
        )
    if info.state is JobState.SUCCEEDED:
        if info.result_until is None:
            raise NoResult(
                f"job {info.name!r} (id {job_id}) succeeded but keeps no result: declare it with "
                "@app.job(result_ttl=…) to keep its return value"
            )
        return True, info.result
    if info.state in (JobState.DEAD, JobState.CANCELLED):
        why = (info.last_error or "").strip().splitlines()[:1]
        raise JobFailed(
            f"job {info.name!r} (id {job_id}) is {info.state} and will give no result"
            + (f"; its last error: {why[0]}" if why else ""),
            info,
        )
    return False, None


def poll_delays() -> Iterator[float]:
    """The pauses between the reads of a waiting ``App.result``."""
    delay = POLL_FIRST
    while True:
        yield delay
        delay = min(delay * 2, POLL_MAX)
