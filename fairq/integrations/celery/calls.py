"""What the Celery integrations read from a task and one call of it: the call signature (a
bound task's ``self`` left out), the call's tenant, the task's home queue."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from fairq.app.checks import tenant_by_rule
from fairq.app.declare import check_tenant_rule
from fairq.errors import ConfigError, JobArgumentsError


def signature_holder(cls: type) -> Callable[..., Any]:
    """A callable with the task's call signature: what fairq checks arguments and finds the
    tenant argument against."""
    run = inspect.getattr_static(cls, "run")
    if isinstance(run, staticmethod):
        fn: Callable[..., Any] = run.__func__
        return fn
    if not callable(run):
        raise ConfigError(f"task {getattr(cls, 'name', cls)!r} has no run method")
    return functools.partial(run, None)


def tenant_of_call(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """The tenant ``fair_tenant`` finds in a call (None: it finds none, or there is no rule),
    by the App's own rule (fairq.app.checks.tenant_by_rule). Read off the task's class, as
    ``FairCelery.declare`` reads it: through the task, a function would be bound to it."""
    rule = getattr(type(task), "fair_tenant", None)
    if rule is None:
        return None
    signature = inspect.signature(signature_holder(type(task)))
    check_tenant_rule(rule, signature, task.name)

    def bound() -> dict[str, Any]:
        try:
            found = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise JobArgumentsError(f"arguments do not fit task {task.name!r}: {exc}") from None
        found.apply_defaults()
        return found.arguments

    return tenant_by_rule(rule, f"task {task.name!r}", args, kwargs, bound)


def home_queue(task: Any, celery_app: Any) -> str:
    """``fair_queue``, else the task's ``queue``, else the app's default queue."""
    queue = getattr(task, "fair_queue", None) or getattr(task, "queue", None)
    queue = queue or celery_app.conf.task_default_queue
    return queue if isinstance(queue, str) else str(queue.name)
