"""What a fair task is, what a fair enqueue returns, and the fair tasks of this process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairq.app import App
from fairq.app.declare import JobDefinition
from fairq.errors import ConfigError
from fairq.job import JobInfo

if TYPE_CHECKING:
    from fairq.integrations.rq.fair import FairRQ

#: Set in ``job.meta`` of a relayed RQ job whose lease was no longer held (an older copy).
SKIPPED_KEY = "fairq_skipped"

#: Every fair task of this process by name, for ``enqueue("module.function")`` by string.
_BY_NAME: dict[str, FairTask] = {}


@dataclass(frozen=True)
class FairTask:
    """A function marked fair: its fairq declaration and the RQ options its jobs get."""

    owner: FairRQ = field(repr=False)
    definition: JobDefinition[Any, Any]
    job_timeout: int | None = None
    result_ttl: int | None = None
    failure_ttl: int | None = None

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True)
class Held:
    """What a fair enqueue returns instead of an ``rq.job.Job``: the job is in fairq, and
    becomes an RQ job (id ``<id>-<suffix>``, one per release) when the relay releases it."""

    id: str  # the fairq job id
    name: str
    queue: str
    app: App = field(repr=False, compare=False)

    def info(self) -> JobInfo | None:
        """The job as fairq knows it (state, attempts, last error)."""
        return self.app.job_info(self.id)


def register(task: FairTask) -> None:
    known = _BY_NAME.get(task.name)
    if known is not None and known.owner is not task.owner:
        raise ConfigError(f"{task.name!r} is already a fair task of another FairRQ")
    _BY_NAME[task.name] = task


def task_named(name: str | None) -> FairTask | None:
    return _BY_NAME.get(name or "")


def fair_task_of(func: object) -> FairTask | None:
    """The fair task a function (or its RQ import path) is, or None."""
    if isinstance(func, str):
        return task_named(func)
    task = getattr(func, "fairq_task", None)
    return task if isinstance(task, FairTask) else None


def import_path(fn: Callable[..., Any]) -> str:
    """The name RQ workers import the function by, which is also its fairq job name."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not callable(fn) or not module or not qualname:
        raise ConfigError(f"@fair.task needs a function, got {fn!r}")
    if module == "__main__" or "<locals>" in qualname or "<lambda>" in qualname:
        raise ConfigError(
            f"fair task {qualname!r} must be a module-level function of an importable module "
            "(RQ workers import it by path), not one of __main__ or defined inside a function"
        )
    return f"{module}.{qualname}"
