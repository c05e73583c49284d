"""One job call waiting to be enqueued (``Call``), and the per-enqueue ``Options`` that override
its declaration: what ``job.call``, ``job.options(...)`` and ``App.enqueue`` build and
``App.enqueue_many`` takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fairq.errors import JobArgumentsError


@dataclass(frozen=True, kw_only=True)
class Options:
    """Per-enqueue overrides of a job's declaration."""

    tenant: str | int | None = None
    queue: str | None = None
    delay: float | timedelta | None = None
    run_at: float | datetime | None = None
    priority: int = 0
    #: Small str metadata stored with the job and given back in its leases (a trace context).
    headers: Mapping[str, str] | None = None
    #: A unique key (docs/unique.md): while a job with the same key in the same queue and
    #: tenant is scheduled, ready or running, enqueueing stores nothing and returns its id.
    unique_key: str | None = None
    #: How long the key may hold at most (seconds or a timedelta); with no ``unique_key``, the
    #: key is the declared one, else a digest of the job's name and arguments.
    unique_for: float | timedelta | None = None


#: A call's options when none are given (``job.enqueue``): one, since it never changes.
NO_OPTIONS = Options()


@dataclass(frozen=True)
class Call:
    """One job call waiting to be enqueued (see ``App.enqueue_many``)."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: Options


def call_by_name(
    name: str, args: Sequence[Any], kwargs: dict[str, Any] | None, options: dict[str, Any]
) -> Call:
    """``App.enqueue``'s (and ``aenqueue``'s) call of a job named ``name``."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise JobArgumentsError(
            f"args must be a list or tuple of positional arguments, got {args!r}"
        )
    return Call(
        name, tuple(args), dict(kwargs or {}), Options(**options) if options else NO_OPTIONS
    )
