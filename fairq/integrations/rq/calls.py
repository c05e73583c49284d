"""Reading RQ's enqueue calls for a fair task: its own arguments, and RQ options it refuses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from fairq.errors import ConfigError
from fairq.integrations.rq.tasks import FairTask

#: RQ's per-call options, and why a fair task refuses each.
_WHY = {
    "timeout": "set job_timeout once on @fair.task(job_timeout=...)",
    "result_ttl": "set it once on @fair.task(result_ttl=...)",
    "failure_ttl": "set it once on @fair.task(failure_ttl=...)",
    "retry": "fairq retries a failed fair task itself: set max_attempts/retry_base on @fair.task",
    "rate_limit": "use fairq's per-tenant caps and rates (App.set_tenant) instead",
    "at_front": "fairq's scheduler decides the order",
}


#: The keyword arguments ``Queue.enqueue`` and ``enqueue_at`` take for RQ itself (2.x and 3.x).
_RQ_KEYWORDS = (
    "job_timeout",
    "description",
    "result_ttl",
    "ttl",
    "failure_ttl",
    "depends_on",
    "job_id",
    "at_front",
    "meta",
    "retry",
    "repeat",
    "on_success",
    "on_failure",
    "on_stopped",
    "rate_limit",
    "webhooks",
    "pipeline",
    "unique",
)


def split_call(
    task: FairTask, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Sequence[Any], dict[str, Any]]:
    """A fair call's own arguments, refusing the RQ options it cannot honour."""
    fn_args, fn_kwargs, options = function_arguments(args, kwargs)
    refuse_rq_options(task, {"timeout" if k == "job_timeout" else k: v for k, v in options.items()})
    return fn_args, fn_kwargs


def function_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Sequence[Any], dict[str, Any], dict[str, Any]]:
    """The function's arguments and RQ's options of an ``enqueue``-style call, read the way
    RQ reads them (its keywords are RQ's; ``args=``/``kwargs=`` hold the function's)."""
    kwargs = dict(kwargs)
    options = {name: kwargs.pop(name) for name in _RQ_KEYWORDS if name in kwargs}
    if "args" in kwargs or "kwargs" in kwargs:
        if args:
            raise ConfigError(
                "give the function's arguments positionally or as args=/kwargs=, not both"
            )
        return kwargs.pop("args", None) or (), kwargs.pop("kwargs", None) or {}, options
    return args, kwargs, options


def refuse_rq_options(task: FairTask, options: Mapping[str, Any]) -> None:
    """Refuse RQ options a fair task cannot honour: its RQ job is made later, by the relay."""
    for option, value in options.items():
        if option in ("func", "f", "args", "kwargs") or value is None or value is False:
            continue
        why = _WHY.get(
            option,
            "the RQ job is only created when the relay releases it; enqueue it with a plain "
            "rq.Queue if it needs that",
        )
        raise ConfigError(f"fair task {task.name!r}: RQ option {option}= is not supported ({why})")


def aware(when: datetime | None) -> datetime | None:
    """RQ reads a naive datetime as local time; fairq needs an aware one."""
    if when is None:
        return None
    if not isinstance(when, datetime):
        raise ConfigError(f"enqueue_at needs a datetime, got {when!r}")
    return when if when.tzinfo is not None else when.astimezone()
