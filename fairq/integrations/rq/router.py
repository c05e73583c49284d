"""fairq's router for RQ jobs that go straight to RQ, without the relay (``@fair.guard``).

**Router** (``throttle=``): at enqueue, the store counts the call in the same sliding window a
native enqueue of that job and tenant uses (``Backend.route``) and names the queue: the home
queue, or the last matching rule's slower one. A job enqueued into another queue than its home
one was chosen explicitly: never re-routed, not counted. RQ's own retries re-enqueue a job
without calling ``enqueue``, so a retry is not counted again. Tenant slots, the guard's other
rule: slots.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fairq.app.declare import JobDefinition
from fairq.contract import RouteParams
from fairq.errors import ConfigError, MissingTenant
from fairq.policy.bounds import check_tenant
from fairq.relay import RelayedRuns


@dataclass(frozen=True)
class GuardedTask:
    """A function whose RQ jobs fairq routes (``throttle``) and/or holds to slots."""

    definition: JobDefinition[Any, Any]  # for its tenant rule and home queue; not an App job
    runs: RelayedRuns = field(repr=False)  # for the store connection of this process
    slots: bool
    limit: int | None
    slot_lease: float

    @property
    def name(self) -> str:
        return self.definition.name

    def tenant(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        """The call's tenant (MissingTenant, naming the task, when it has none)."""
        bound = self.definition.check_arguments(args, dict(kwargs))
        found = self.definition.tenant_of(args, dict(kwargs), bound)
        if found is None or found == "":
            raise MissingTenant(
                f"RQ task {self.name!r} has no tenant: its rule "
                f"{self.definition.tenant_rule!r} found none in the call's arguments"
            )
        return check_tenant(found)


#: Every guarded task of this process by name (RQ's import path).
_GUARDED: dict[str, GuardedTask] = {}


def register(task: GuardedTask) -> None:
    if task.name in _GUARDED:
        raise ConfigError(f"{task.name!r} is already a guarded RQ task")
    _GUARDED[task.name] = task


def guarded_task_of(func: object) -> GuardedTask | None:
    """The guarded task a function (or its RQ import path) is, or None."""
    if isinstance(func, str):
        return _GUARDED.get(func)
    task = getattr(func, "fairq_guard", None)
    return task if isinstance(task, GuardedTask) else None


def route(task: GuardedTask, queue: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The RQ queue a call enqueued into ``queue`` goes to (counted when it is the home one)."""
    home = task.definition.queue
    if queue != home or not task.definition.throttle:
        return queue  # chosen explicitly, or nothing to count against
    params = RouteParams(
        name=task.name,
        tenant=task.tenant(args, kwargs),
        queue=home,
        rules=task.definition.throttle,
        now=time.time(),
    )
    return task.runs.backend().route(params).queue
