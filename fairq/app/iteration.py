"""Iterative jobs: a long job written as an iteration over a JSON cursor (``App.iterative_job``).

The function is a generator (``def``, or ``async def`` for an async generator) whose first
parameter is the cursor to resume after (None on the first run) and which yields the cursor
after each item or batch. The worker checkpoints the cursor with the job as it goes
(``Backend.checkpoint``), hands the job back to the scheduler when its time slice is used up
(its tenant is charged for the slice, others get their turn, and it resumes from the cursor)
and at a worker's shutdown; after a crash it resumes from its last checkpoint. The cursor comes
first so that ``export.enqueue(account)`` is type-checked against the other parameters
(``Concatenate``). How the worker runs one: fairq/worker/iteration.py; docs/iteration.md.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, Concatenate, ParamSpec, Protocol, TypedDict, TypeVar

from fairq.app.declare import (
    Enqueuer,
    JobDefinition,
    QueueDeclaration,
    TenantRule,
    UniqueRule,
    job_rules,
)
from fairq.errors import ConfigError
from fairq.policy.bounds import check_seconds
from fairq.policy.queues import check_queue_name
from fairq.policy.throttle import Throttle

P = ParamSpec("P")
C = TypeVar("C")

#: An iterative job's function: ``(cursor or None, *args) -> yields cursors``.
IterFn = Callable[Concatenate[C | None, P], Iterator[C] | AsyncIterator[C]]

DEFAULT_SLICE = 30.0  # seconds a run may take before it hands its worker back
DEFAULT_CHECKPOINT_ITEMS = 100  # a checkpoint at least every this many cursors …
DEFAULT_CHECKPOINT_SECONDS = 1.0  # … or this many seconds, whichever comes first


class IterativeSettings(TypedDict, total=False):
    """``App.iterative_job``'s settings: ``App.job``'s, and the iteration's own."""

    name: str
    queue: str
    tenant: TenantRule
    slice: float | timedelta  # seconds a run may take before it hands its worker back
    checkpoint_items: int  # a checkpoint at least every this many cursors …
    checkpoint_seconds: float | timedelta  # … or this many seconds, whichever comes first
    max_attempts: int
    lease: float | timedelta
    cost: float | timedelta
    learn_cost: bool
    retry_base: float | timedelta
    throttle: Sequence[Throttle]
    unique_for: float | timedelta | None
    unique_key: UniqueRule


class Declarer(Protocol):
    """What ``@app.iterative_job(...)`` returns: it turns a generator function into a job."""

    def __call__(self, fn: IterFn[C, P], /) -> IterativeJob[P]: ...


class IterativeJob(JobDefinition[P, Any]):
    """A declared iterative job. ``.enqueue(...)`` takes the arguments after the cursor;
    calling it runs the whole iteration here, from the start (``def`` only)."""

    def __init__(
        self,
        app: Enqueuer,
        fn: IterFn[Any, P],
        *,
        slice_seconds: float,
        checkpoint_items: int,
        checkpoint_seconds: float,
        **declaration: Any,  # JobDefinition's
    ) -> None:
        whole = check_generator(fn, declaration["name"])
        rest = list(whole.parameters.values())[1:]
        super().__init__(app, fn, signature=whole.replace(parameters=rest), **declaration)  # type: ignore[arg-type]
        self.is_async = inspect.isasyncgenfunction(fn)
        self.iterate: Callable[..., Iterator[Any] | AsyncIterator[Any]] = fn
        self.slice_seconds = slice_seconds
        self.checkpoint_items = checkpoint_items
        self.checkpoint_seconds = checkpoint_seconds

    @classmethod
    def declared(
        cls,
        app: Enqueuer,
        fn: IterFn[Any, P],
        queues: Mapping[str, QueueDeclaration],
        settings: IterativeSettings,
    ) -> IterativeJob[P]:
        """The job ``settings`` declare, each checked (ConfigError naming the fix)."""
        name = settings.get("name") or f"{fn.__module__}.{fn.__qualname__}"
        _check_known(settings, name)
        home = check_queue_name(settings.get("queue", "default"))
        rules = job_rules(settings.get("throttle", ()), home, queues)
        return cls(
            app,
            fn,
            name=name,
            queue=home,
            tenant=settings.get("tenant"),
            max_attempts=settings.get("max_attempts", 3),
            lease=settings.get("lease", 60.0),
            cost=settings.get("cost", 1.0),
            learn_cost=settings.get("learn_cost", True),
            retry_base=settings.get("retry_base", 1.0),
            throttle=rules,
            unique_for=settings.get("unique_for"),
            unique_key=settings.get("unique_key"),
            slice_seconds=_positive("slice", settings.get("slice", DEFAULT_SLICE), name),
            checkpoint_items=check_items(
                settings.get("checkpoint_items", DEFAULT_CHECKPOINT_ITEMS), name
            ),
            checkpoint_seconds=_positive(
                "checkpoint_seconds",
                settings.get("checkpoint_seconds", DEFAULT_CHECKPOINT_SECONDS),
                name,
            ),
        )

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Run every item here, in this process, from the start; the last cursor."""
        if self.is_async:
            raise TypeError(f"iterative job {self.name!r} is async: run it on a worker")
        last = None
        for cursor in self.iterate(None, *args, **kwargs):  # type: ignore[union-attr]
            last = cursor
        return last


def _check_known(settings: Mapping[str, object], name: str) -> None:
    """Refuse a setting an iterative job does not take, rather than drop it unseen."""
    unknown = sorted(set(settings) - set(IterativeSettings.__annotations__))
    if "result_ttl" in unknown:
        raise ConfigError(
            f"iterative job {name!r} takes no result_ttl: it keeps no result, its outcome is "
            "its cursor (JobInfo.progress); drop result_ttl, or declare a plain @app.job"
        )
    if unknown:
        raise ConfigError(
            f"iterative job {name!r} takes no setting {', '.join(unknown)}; it takes: "
            f"{', '.join(IterativeSettings.__annotations__)}"
        )


def check_generator(fn: object, name: str) -> inspect.Signature:
    """The function's signature, if it can be an iterative job; else ConfigError saying why."""
    if not (inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)):
        raise ConfigError(
            f"iterative job {name!r} must be a generator function that yields cursors "
            "(def … yield, or async def … yield); for a plain function use @app.job"
        )
    signature = inspect.signature(fn)
    first = next(iter(signature.parameters.values()), None)
    if first is None or first.kind not in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD):
        raise ConfigError(
            f"iterative job {name!r} must take the cursor as its first parameter, "
            f"e.g. def {name.rpartition('.')[2]}(cursor: int | None, account: str)"
        )
    return signature


def check_items(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"checkpoint_items of iterative job {name!r} must be a whole number of at least 1 "
            f"(1: a checkpoint after every cursor), not {value!r}"
        )
    return value


def _positive(label: str, value: object, name: str) -> float:
    try:
        return check_seconds(label, value)
    except ConfigError as exc:
        raise ConfigError(f"iterative job {name!r}: {exc}") from None
