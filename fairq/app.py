"""The user-facing API: declare jobs, enqueue them, tune tenants, look inside.

An ``App`` is bound to one store URL. Producers and workers build the same ``App`` (usually by
importing the module that declares the jobs); a worker runs it with ``fairq worker module:app``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, ParamSpec, TypeVar, overload

from fairq.backends import check_url, open_backend
from fairq.contract import (
    KEEP,
    Backend,
    EnqueueParams,
    JobType,
    Keep,
    ListDeadParams,
    QueueSettings,
    RequeueParams,
    StatsParams,
    TenantSettingsParams,
    TenantStats,
)
from fairq.errors import (
    ConfigError,
    InvalidTenant,
    JobArgumentsError,
    MissingTenant,
    UnknownJob,
)
from fairq.job import DEFAULT_MAX_PAYLOAD_BYTES, JobInfo, NewJob, encode_payload
from fairq.policy.fairness import check_max_running, check_weight
from fairq.policy.queues import check_queue_name

P = ParamSpec("P")
R = TypeVar("R")
TenantRule = str | Callable[..., object] | None

DEFAULT_URL = "sqlite:///fairq.db"
MAX_TENANT_CHARS = 65_536
log = logging.getLogger("fairq")


def resolve_url(url: str | None) -> str:
    """The store URL: the argument, else ``$FAIRQ_URL``, else ``fairq.db`` in the working dir."""
    return url if url is not None else os.environ.get("FAIRQ_URL") or DEFAULT_URL


@dataclass(frozen=True, kw_only=True)
class Options:
    """Per-enqueue overrides of a job's declaration."""

    tenant: str | int | None = None
    queue: str | None = None
    delay: float | timedelta | None = None
    run_at: float | datetime | None = None
    priority: int = 0


@dataclass(frozen=True)
class Call:
    """One job call waiting to be enqueued (see ``App.enqueue_many``)."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: Options


class App:
    """Jobs declared against one store.

    ``url``: ``sqlite:///path.db`` (default ``$FAIRQ_URL``, then ``fairq.db`` here) or
    ``memory://`` (the reference model, one process only). ``fallback_tenant``: used, with a
    warning, for jobs whose tenant is missing; by default a missing tenant is an error.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        backend: Backend | None = None,
        fallback_tenant: str | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = resolve_url(url)
        if backend is None:
            check_url(self.url)  # a bad URL fails here, not at the first enqueue
        if fallback_tenant is not None:
            fallback_tenant = _check_tenant(fallback_tenant)
        if isinstance(max_payload_bytes, bool) or not isinstance(max_payload_bytes, int):
            raise ConfigError(f"max_payload_bytes must be an int, got {max_payload_bytes!r}")
        if max_payload_bytes < 64:
            raise ConfigError(f"max_payload_bytes must be at least 64, got {max_payload_bytes}")
        self.fallback_tenant = fallback_tenant
        self.max_payload_bytes = max_payload_bytes
        self.clock = clock
        self.jobs: dict[str, JobDefinition[Any, Any]] = {}
        self._backend = backend
        self._lock = threading.Lock()

    # -- the store -------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The store, opened on first use (so importing an app never touches it)."""
        if self._backend is None:
            with self._lock:
                if self._backend is None:
                    self._backend = open_backend(self.url)
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    # -- declaring jobs --------------------------------------------------------------------

    @overload
    def job(
        self,
        fn: Callable[P, R],
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        tenant: TenantRule = None,
        max_attempts: int = 3,
        lease: float = 60.0,
        cost: float = 1.0,
        retry_base: float = 1.0,
    ) -> JobDefinition[P, R]: ...

    @overload
    def job(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        tenant: TenantRule = None,
        max_attempts: int = 3,
        lease: float = 60.0,
        cost: float = 1.0,
        retry_base: float = 1.0,
    ) -> Callable[[Callable[P, R]], JobDefinition[P, R]]: ...

    def job(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        tenant: TenantRule = None,
        max_attempts: int = 3,
        lease: float = 60.0,
        cost: float = 1.0,
        retry_base: float = 1.0,
    ) -> JobDefinition[P, R] | Callable[[Callable[P, R]], JobDefinition[P, R]]:
        """Declare a job: ``@app.job(queue="imports", tenant="account_id")``.

        ``tenant`` names the argument that holds the tenant id, or is a callable that takes the
        job's arguments and returns it. ``lease``: seconds a worker may hold the job without a
        heartbeat. ``cost``: estimated seconds per run, corrected by the real run time.
        """

        def declare(f: Callable[P, R]) -> JobDefinition[P, R]:
            definition = JobDefinition(
                self,
                f,
                name=name or f"{f.__module__}.{f.__qualname__}",
                queue=queue,
                tenant=tenant,
                max_attempts=max_attempts,
                lease=lease,
                cost=cost,
                retry_base=retry_base,
            )
            if definition.name in self.jobs:
                raise ConfigError(f"a job named {definition.name!r} is already declared")
            self.jobs[definition.name] = definition
            return definition

        return declare(fn) if fn is not None else declare

    def publish(self) -> None:
        """Record the declared jobs in the store, so producers can enqueue them by name."""
        self.backend.publish_job_types([d.job_type() for d in self.jobs.values()])

    # -- enqueueing ------------------------------------------------------------------------

    def enqueue(
        self,
        name: str,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """Enqueue a job by name with JSON arguments; returns its id."""
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise JobArgumentsError(
                f"args must be a list or tuple of positional arguments, got {args!r}"
            )
        call = Call(name, tuple(args), dict(kwargs or {}), Options(**options))
        return self.enqueue_many([call])[0]

    def enqueue_many(self, calls: Iterable[Call]) -> list[str]:
        """Enqueue several jobs in one store transaction: all are stored, or none."""
        now = self.clock()
        jobs = [self._new_job(call, now) for call in calls]
        if jobs:
            self.backend.enqueue(EnqueueParams(jobs=jobs, now=now))
        return [job.id for job in jobs]

    def _new_job(self, call: Call, now: float) -> NewJob:
        spec = self._job_type(call.name)
        definition = self.jobs.get(spec.name)
        if definition is not None:
            definition.check_arguments(call.args, call.kwargs)
        opts = call.options
        queue = check_queue_name(opts.queue) if opts.queue is not None else spec.queue
        return NewJob(
            id=uuid.uuid4().hex,
            name=spec.name,
            queue=queue,
            tenant=self._tenant_for(call, spec),
            payload=encode_payload(call.args, call.kwargs, max_bytes=self.max_payload_bytes),
            priority=_check_priority(opts.priority),
            run_at=_run_at(opts, now),
            max_attempts=spec.max_attempts,
            lease_timeout=spec.lease_timeout,
            cost=spec.cost,
        )

    def _job_type(self, name: str) -> JobType:
        if name in self.jobs:
            return self.jobs[name].job_type()
        published = self.backend.job_types()
        if name in published:
            return published[name]
        known = sorted(set(self.jobs) | set(published)) or ["(none)"]
        raise UnknownJob(
            f"no job named {name!r} is declared; known jobs: {', '.join(known)}. "
            "A worker publishes its app's jobs when it starts (or call App.publish())."
        )

    def _tenant_for(self, call: Call, spec: JobType) -> str:
        found: object = call.options.tenant
        if found is None:
            definition = self.jobs.get(spec.name)
            if definition is not None:
                found = definition.tenant_of(call.args, call.kwargs)
            elif spec.tenant_arg is not None:
                found = _argument(spec, call.args, call.kwargs)
        if found is None or found == "":
            if self.fallback_tenant is None:
                raise MissingTenant(
                    f"job {spec.name!r} has no tenant: pass tenant=… when enqueueing, declare "
                    "@app.job(tenant='arg_name'), or set App(fallback_tenant=…)"
                )
            log.warning(
                "job %r has no tenant; using fallback tenant %r", spec.name, self.fallback_tenant
            )
            return self.fallback_tenant
        return _check_tenant(found)

    # -- tenants and queues ----------------------------------------------------------------

    def set_tenant(
        self,
        queue: str,
        tenant: str,
        *,
        weight: float | Keep | None = KEEP,
        max_running: int | Keep | None = KEEP,
    ) -> TenantStats:
        """Change a tenant's weight or cap at run time; ``None`` returns it to the queue default."""
        if not isinstance(weight, Keep) and weight is not None:
            weight = check_weight(weight)
        if not isinstance(max_running, Keep):
            max_running = check_max_running(max_running)
        params = TenantSettingsParams(
            queue=check_queue_name(queue),
            tenant=_check_tenant(tenant),
            now=self.clock(),
            weight=weight,
            max_running=max_running,
        )
        return self.backend.set_tenant(params)

    def set_queue(self, queue: str, *, weight: float = 1.0, max_running: int | None = None) -> None:
        """Set the defaults every tenant of ``queue`` gets unless it has its own."""
        settings = QueueSettings(
            queue=check_queue_name(queue),
            weight=check_weight(weight),
            max_running=check_max_running(max_running),
        )
        self.backend.set_queue(settings)

    # -- inspection ------------------------------------------------------------------------

    def job_info(self, job_id: str) -> JobInfo | None:
        found = self.backend.get_jobs([job_id])
        return found[0] if found else None

    def stats(self, queue: str | None = None, tenant: str | None = None) -> list[TenantStats]:
        return self.backend.stats(StatsParams(queue=queue, tenant=tenant))

    def dead(
        self, queue: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> list[JobInfo]:
        return self.backend.list_dead(ListDeadParams(queue=queue, tenant=tenant, limit=limit))

    def requeue(self, ids: Sequence[str]) -> int:
        """Give dead jobs a fresh set of attempts; returns how many were dead."""
        return self.backend.requeue(RequeueParams(ids=list(ids), now=self.clock()))


class JobDefinition(Generic[P, R]):
    """A declared job. Call it to run it here; ``.enqueue(...)`` to run it on a worker."""

    def __init__(
        self,
        app: App,
        fn: Callable[P, R],
        *,
        name: str,
        queue: str,
        tenant: TenantRule,
        max_attempts: int,
        lease: float,
        cost: float,
        retry_base: float,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.queue = check_queue_name(queue)
        self.signature = inspect.signature(fn)
        self.tenant_rule = _check_tenant_rule(tenant, self.signature, name)
        self.max_attempts = _check_positive_int("max_attempts", max_attempts)
        self.lease_timeout = _check_positive_float("lease", lease)
        self.cost = _check_positive_float("cost", cost)
        self.retry_base = _check_positive_float("retry_base", retry_base)
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        """A call to pass to ``App.enqueue_many``."""
        return Call(self.name, args, kwargs, Options())

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return self.app.enqueue_many([self.call(*args, **kwargs)])[0]

    def options(self, **options: Any) -> BoundOptions[P]:
        """Override tenant, queue, delay, run_at or priority: ``job.options(delay=60)``."""
        return BoundOptions(self, Options(**options))

    def check_arguments(
        self, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> inspect.BoundArguments:
        """Refuse at enqueue a call that could never run on a worker."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise JobArgumentsError(f"arguments do not fit job {self.name!r}: {exc}") from None
        bound.apply_defaults()
        return bound

    def tenant_of(self, args: Sequence[Any], kwargs: dict[str, Any]) -> object:
        rule = self.tenant_rule
        if rule is None:
            return None
        if callable(rule):
            return rule(*args, **kwargs)
        return self.check_arguments(args, kwargs).arguments.get(rule)

    def job_type(self) -> JobType:
        return JobType(
            name=self.name,
            queue=self.queue,
            tenant_arg=self.tenant_rule if isinstance(self.tenant_rule, str) else None,
            params=tuple(
                p.name
                for p in self.signature.parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ),
            max_attempts=self.max_attempts,
            lease_timeout=self.lease_timeout,
            cost=self.cost,
        )


class BoundOptions(Generic[P]):
    def __init__(self, definition: JobDefinition[P, Any], options: Options) -> None:
        self.definition = definition
        self._options = options

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        return Call(self.definition.name, args, kwargs, self._options)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return self.definition.app.enqueue_many([self.call(*args, **kwargs)])[0]


def _argument(spec: JobType, args: Sequence[Any], kwargs: dict[str, Any]) -> object:
    name = spec.tenant_arg
    if name is None:
        return None
    if name in kwargs:
        return kwargs[name]
    if name in spec.params:
        index = list(spec.params).index(name)
        if index < len(args):
            return args[index]
    return None


def _check_tenant(tenant: object) -> str:
    if isinstance(tenant, bool) or not isinstance(tenant, (str, int)):
        raise InvalidTenant(
            f"tenant must be a str (or an int, stored as its decimal text), got {tenant!r}"
        )
    text = str(tenant)
    if text == "":
        raise MissingTenant("tenant must not be empty")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise InvalidTenant(f"tenant id {text!r} is not valid Unicode (a lone surrogate)") from None
    if len(text) > MAX_TENANT_CHARS:
        raise InvalidTenant(f"tenant id is {len(text)} characters, over {MAX_TENANT_CHARS}")
    return text


def _check_tenant_rule(rule: TenantRule, signature: inspect.Signature, name: str) -> TenantRule:
    if rule is None or callable(rule):
        return rule
    if not isinstance(rule, str):
        raise ConfigError(f"tenant= must be an argument name or a callable, got {rule!r}")
    if rule not in signature.parameters:
        raise ConfigError(
            f"job {name!r} takes no argument {rule!r} to find its tenant in; "
            f"its arguments are: {', '.join(signature.parameters) or '(none)'}"
        )
    return rule


def _check_priority(priority: object) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ConfigError(f"priority must be an int, got {priority!r}")
    if not -(2**31) <= priority < 2**31:
        raise ConfigError(f"priority must fit in 32 bits, got {priority}")
    return priority


def _check_positive_int(label: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{label} must be a whole number of at least 1, got {value!r}")
    return value


def _check_positive_float(label: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{label} must be a number of seconds, got {value!r}")
    if not (0 < value < float("inf")):
        raise ConfigError(f"{label} must be a positive finite number, got {value!r}")
    return float(value)


def _run_at(opts: Options, now: float) -> float:
    if opts.delay is not None and opts.run_at is not None:
        raise ConfigError("give delay or run_at, not both")
    if opts.delay is not None:
        delay = opts.delay.total_seconds() if isinstance(opts.delay, timedelta) else opts.delay
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay >= 0:
            raise ConfigError(f"delay must be a non-negative number of seconds, got {delay!r}")
        return now + float(delay)
    if opts.run_at is not None:
        if isinstance(opts.run_at, datetime):
            if opts.run_at.tzinfo is None:
                raise ConfigError("run_at must be timezone-aware (e.g. datetime.now(timezone.utc))")
            return opts.run_at.timestamp()
        if isinstance(opts.run_at, bool) or not isinstance(opts.run_at, (int, float)):
            raise ConfigError(f"run_at must be a datetime or epoch seconds, got {opts.run_at!r}")
        if opts.run_at != opts.run_at:
            raise ConfigError("run_at must not be NaN")
        return float(opts.run_at)
    return now
