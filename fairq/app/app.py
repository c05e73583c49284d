"""The user-facing API: declare jobs and queues, enqueue, tune tenants, look inside.

An ``App`` is bound to one store URL. Producers and workers build the same ``App`` (usually by
importing the module that declares the jobs); a worker runs it with ``fairq worker module:app``.
Declarations and their checks live in ``fairq.app.declare``, each enqueue call's checks in
``fairq.app.checks``; this module enqueues and inspects.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from fairq.app import params
from fairq.app.aio import AsyncMethods, AsyncState
from fairq.app.calls import Call, call_by_name
from fairq.app.declare import (
    JobDefinition,
    QueueDeclaration,
    TenantRule,
    TenantWeights,
    UniqueRule,
    WeightsFn,
    declare_sharding,
    job_rules,
)
from fairq.app.enqueue import enqueueing, performed
from fairq.app.iteration import Declarer, IterativeJob, IterativeSettings, IterFn
from fairq.app.periodic import Schedule, declare_schedules
from fairq.app.waiting import Pause, Wanted, check_timeout, result_of
from fairq.backends import check_url, open_backend
from fairq.backends.clock import Clock
from fairq.backends.steps import drive
from fairq.contract import (
    KEEP,
    Backend,
    CancelOutcome,
    GetJobsParams,
    Keep,
    PublishJobTypesParams,
    TenantFigures,
    TenantStats,
)
from fairq.errors import ConfigError
from fairq.instrument import Middleware
from fairq.instrument.hooks import Hooks, check_middleware
from fairq.instrument.logs import JobLog
from fairq.instrument.timing import TimedBackend
from fairq.job import DEFAULT_MAX_PAYLOAD_BYTES, JobInfo
from fairq.policy.bounds import (
    check_seconds,
    check_tenant,
    check_weight,
)
from fairq.policy.queues import QueueOrder, check_declared_name, check_queue_name
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle
from fairq.reports import tenant_report
from fairq.reports.verdicts import TenantReport

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's
    from typing_extensions import Unpack

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C")
D = TypeVar("D", bound=JobDefinition[Any, Any])

DEFAULT_URL = "sqlite:///fairq.db"
log = logging.getLogger("fairq")


def resolve_url(url: str | None) -> str:
    """The store URL: the argument, else ``$FAIRQ_URL``, else ``fairq.db`` in the working dir."""
    return url if url is not None else os.environ.get("FAIRQ_URL") or DEFAULT_URL


class App(AsyncMethods):
    """Jobs declared against one store.

    ``url`` (default ``$FAIRQ_URL``, then ``sqlite:///fairq.db`` in the working directory):
    ``sqlite:///path.db``; ``redis://[:password@]host:6379/0[?prefix=fairq]`` (also
    ``rediss://``, ``unix://``; extra ``fairq[redis]``);
    ``postgresql://user:password@host:5432/db[?schema=fairq&migrate=false]`` (extra
    ``fairq[postgres]``); or ``memory://`` (the reference model, one process only). Nothing
    is opened until the store is first used.

    ``fallback_tenant``: used, with a warning, for jobs whose tenant is missing; by default a
    missing tenant is an error. ``clock``: the time of enqueues and settings; a clock of your
    own (tests, simulations) is followed exactly, the real one is bounded by the store's.
    ``middleware``: plug-ins of the instrumentation seam (``fairq.instrument``), e.g.
    ``[fairq.instrument.prometheus.PrometheusMetrics()]``, after the job log every App has.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        backend: Backend | None = None,
        fallback_tenant: str | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        clock: Callable[[], float] = time.time,
        middleware: Sequence[Middleware] = (),
    ) -> None:
        self.url = resolve_url(url)
        if backend is None:
            check_url(self.url)  # a bad URL fails here, not at the first enqueue
        if fallback_tenant is not None:
            fallback_tenant = check_tenant(fallback_tenant)
        if isinstance(max_payload_bytes, bool) or not isinstance(max_payload_bytes, int):
            raise ConfigError(f"max_payload_bytes must be an int, got {max_payload_bytes!r}")
        if max_payload_bytes < 64:
            raise ConfigError(f"max_payload_bytes must be at least 64, got {max_payload_bytes}")
        self.fallback_tenant = fallback_tenant
        self.max_payload_bytes = max_payload_bytes
        self.clock = clock
        self.jobs: dict[str, JobDefinition[Any, Any]] = {}
        self.queues: dict[str, QueueDeclaration] = {}
        self.weight_callbacks: dict[str, TenantWeights] = {}
        self.schedules: dict[str, Schedule] = {}  # periodic jobs, by name (fairq.app.periodic)
        self._backend = backend
        self._timed: Backend | None = None
        self._lock = threading.Lock()
        self._async = AsyncState()
        if isinstance(middleware, (str, bytes)) or not isinstance(middleware, Sequence):
            raise ConfigError(f"middleware must be a list of plug-ins, got {middleware!r}")
        self._middleware: list[object] = [JobLog(clock)]
        self.hooks = Hooks(self._middleware)
        for plugin in middleware:
            self.add_middleware(plugin)

    # -- instrumentation -------------------------------------------------------------------

    def add_middleware(self, middleware: Middleware) -> None:
        """Add a plug-in of the instrumentation seam, after those already there. Add them
        before a worker (or a relayed job's peer worker) starts: it takes the hooks then."""
        check_middleware(middleware)
        with self._lock:
            self._middleware.append(middleware)
            self.hooks = Hooks(self._middleware)
            self._timed = None

    @property
    def middleware(self) -> tuple[object, ...]:
        """The plug-ins, in the order their hooks are called (the job log first)."""
        return tuple(self._middleware)

    @property
    def timed_backend(self) -> Backend:
        """The store as the worker and ``enqueue`` call it: each call timed for the plug-ins
        that want store calls (``Middleware.store_call``); the store itself when none does."""
        timed = self._timed
        if timed is None:
            backend = self.backend
            hooks = self.hooks
            timed = TimedBackend(backend, hooks) if hooks.times_store_calls else backend
            self._timed = timed
        return timed

    # -- the store -------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The store, opened on first use (so importing an app never touches it)."""
        if self._backend is None:
            with self._lock:
                if self._backend is None:
                    # A clock of the caller's own (a test's, a simulation's) is followed
                    # exactly; the real one is bounded by the store's (backends/clock.py).
                    own = self.clock is not time.time
                    self._backend = open_backend(self.url, clock=Clock.CALLER if own else None)
        return self._backend

    def close(self) -> None:
        self._forget_async()
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        self._timed = None

    # -- declaring queues ------------------------------------------------------------------

    def queue(self, name: str, *, weight: float = 1.0, strict: bool = False,
              shards: int | None = None, shard_size: int = 2,
              assign: Mapping[str, Sequence[int]] | None = None) -> None:  # fmt: skip
        """Declare a queue this app's workers serve (with no ``--queues``).

        ``strict`` queues are served first, in the order declared, whenever they have work; the
        others are drawn by ``weight``. A job's home queue is declared for you (weight 1) unless
        you declare it; a throttle rule's queue must be declared before the job that names it:
        ``app.queue("critical", strict=True); app.queue("default", weight=6);
        app.queue("default_throttled", weight=3)``.

        ``shards=n`` splits it into sub-queues ``<name>@0`` … (docs/sharding.md): each tenant gets
        ``shard_size`` of them by a stable hash, or what ``assign={"bigco": [7]}`` names.
        """
        name = check_declared_name(name)
        sharding = declare_sharding(name, shards, shard_size, assign, self.jobs.values(), strict)
        if not isinstance(strict, bool):
            raise ConfigError(f"queue {name!r}: strict must be True or False, got {strict!r}")
        weight = check_weight(weight, label=f"queue {name!r}: weight")
        existing = self.queues.get(name)
        if existing is not None and not existing.implicit:
            raise ConfigError(f"queue {name!r} is already declared")
        self.queues[name] = QueueDeclaration(name, weight, strict, sharding=sharding)

    def queue_order(self, shards: str | None = None) -> QueueOrder:
        """The order a worker with no ``--queues`` serves: strict queues, then weighted ones;
        of a sharded queue only the ``shards`` given (``"0-3"``, ``"1,4,7"``), else all."""
        queues = dict(self.queues)
        for definition in self.jobs.values():
            queues.setdefault(definition.queue, QueueDeclaration(definition.queue, implicit=True))
        if not queues:
            raise ConfigError(
                "the app declares no jobs or queues, so there is no queue to serve; declare "
                "jobs with @app.job, queues with app.queue(…), or name them (--queues)"
            )
        declared = queues.values()
        if shards is not None and not any(q.sharding for q in declared):
            raise ConfigError(f"--shards {shards!r}: the app declares no sharded queue; declare "
                              "one with app.queue('imports', shards=8, shard_size=2)")  # fmt: skip
        return QueueOrder.of(
            strict=[n for q in declared if q.strict for n in q.served(shards)],
            weighted={n: q.weight for q in declared if not q.strict for n in q.served(shards)},
        )

    def tenant_weights(
        self, queue: str, *, every: float | timedelta = 30.0
    ) -> Callable[[WeightsFn], WeightsFn]:
        """Register a callback that gives the weights of ``queue``'s tenants at run time.

        ``@app.tenant_weights("default", every=30.0)`` over ``def weights(tenants) -> {tenant:
        weight}``: workers call it with the tenants that have pending work, at most once per
        ``every`` seconds per process, and store the weights that changed. 0 pauses a tenant;
        tenants it leaves out keep their weight. A bad weight (negative, NaN, not a number) or
        an exception keeps the last good weights and logs an error.
        """
        queue = check_queue_name(queue)
        every = check_seconds("every", every)
        if queue in self.weight_callbacks:
            raise ConfigError(f"queue {queue!r} already has a tenant_weights callback")

        def register(fn: WeightsFn) -> WeightsFn:
            if not callable(fn):
                raise ConfigError(f"tenant_weights needs a function, got {fn!r}")
            self.weight_callbacks[queue] = TenantWeights(queue=queue, fn=fn, every=every)
            return fn

        return register

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
        lease: float | timedelta = 60.0,
        cost: float | timedelta = 1.0,
        learn_cost: bool = True,
        retry_base: float | timedelta = 1.0,
        throttle: Sequence[Throttle] = (),
        result_ttl: float | timedelta | None = None,
        unique_for: float | timedelta | None = None,
        unique_key: UniqueRule = None,
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
        lease: float | timedelta = 60.0,
        cost: float | timedelta = 1.0,
        learn_cost: bool = True,
        retry_base: float | timedelta = 1.0,
        throttle: Sequence[Throttle] = (),
        result_ttl: float | timedelta | None = None,
        unique_for: float | timedelta | None = None,
        unique_key: UniqueRule = None,
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
        lease: float | timedelta = 60.0,
        cost: float | timedelta = 1.0,
        learn_cost: bool = True,
        retry_base: float | timedelta = 1.0,
        throttle: Sequence[Throttle] = (),
        result_ttl: float | timedelta | None = None,
        unique_for: float | timedelta | None = None,
        unique_key: UniqueRule = None,
    ) -> JobDefinition[P, R] | Callable[[Callable[P, R]], JobDefinition[P, R]]:
        """Declare a job: ``@app.job(queue="imports", tenant="account_id")``.

        ``tenant`` names the argument that holds the tenant id, or is a callable that takes the
        job's arguments and returns it. ``lease``: seconds a worker may hold the job without a
        heartbeat. ``cost``: seconds a run is expected to take, charged to the tenant when a
        job is handed out until the store has measured runs of it; then the learned run time
        is charged instead (``learn_cost=False``: always ``cost``). Either way the real run
        time replaces the charge when the run ends (docs/internals/scheduler.md).
        ``throttle``: ``[fairq.Throttle(threshold=100, per=3600, queue="slow"), …]``, least to
        most restrictive; a tenant that enqueued more than ``threshold`` of this job in the last
        ``per`` seconds has its new ones sent to ``queue`` (the last matching rule wins).
        ``result_ttl``: keep the return value (JSON) with the succeeded job this long
        (``job_info(id).result``, ``result(id)``: docs/results.md); by default it is dropped.
        ``unique_for``: enqueueing it again while a job with the same unique key is scheduled,
        ready or running (for at most this long) returns that job's id and stores nothing
        (docs/unique.md); the key is ``unique_key`` (a template of argument names such as
        ``"{account_id}"``, or a callable taking the job's arguments), else its arguments.
        """
        if isinstance(throttle, (str, bytes, Throttle)) or not isinstance(throttle, Sequence):
            raise ConfigError(f"throttle must be a list of fairq.Throttle rules, got {throttle!r}")

        def declare(f: Callable[P, R]) -> JobDefinition[P, R]:
            home = check_queue_name(queue)
            rules = job_rules(throttle, home, self.queues)
            definition = JobDefinition(
                self,
                f,
                name=name or f"{f.__module__}.{f.__qualname__}",
                queue=home,
                tenant=tenant,
                max_attempts=max_attempts,
                lease=lease,
                cost=cost,
                learn_cost=learn_cost,
                retry_base=retry_base,
                throttle=rules,
                result_ttl=result_ttl,
                unique_for=unique_for,
                unique_key=unique_key,
            )
            return self._declared(definition)

        return declare(fn) if fn is not None else declare

    def iterative_job(self, **settings: Unpack[IterativeSettings]) -> Declarer:
        """Declare a job that iterates over a JSON cursor (docs/iteration.md): ``@app.
        iterative_job(tenant="account", slice=30)`` over ``def export(cursor: int | None,
        account: str) -> Iterator[int]``, a generator yielding the cursor after each item.
        Settings: ``job``'s, and ``slice``, ``checkpoint_items``, ``checkpoint_seconds``."""

        def declare(f: IterFn[C, P]) -> IterativeJob[P]:
            return self._declared(IterativeJob.declared(self, f, self.queues, settings))

        return declare

    def _declared(self, definition: D) -> D:
        if definition.name in self.jobs:
            raise ConfigError(f"a job named {definition.name!r} is already declared")
        self.jobs[definition.name] = definition
        self.queues.setdefault(definition.queue, QueueDeclaration(definition.queue, implicit=True))
        return definition

    # -- periodic jobs ---------------------------------------------------------------------

    def periodic(self, cron: str, **settings: Any) -> Callable[[D], D]:
        """Enqueue a declared job on a cron schedule (docs/periodic.md): ``@app.periodic("*/5 *
        * * *", tenant="acme")`` above ``@app.job(...)``. Takes ``schedule``'s settings."""

        def declare(definition: D) -> D:
            self.schedule(definition, cron=cron, **settings)
            return definition

        return declare

    def schedule(
        self,
        job: JobDefinition[Any, Any] | str,
        *,
        cron: str,
        tenant: str | None = None,
        tenants: Sequence[str] | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
        misfire_grace: float | timedelta | None = None,
        timezone: str | None = None,
    ) -> list[Schedule]:
        """Enqueue ``job`` (declared on this App) with ``args``/``kwargs`` at every tick of
        ``cron`` (five fields, or six with seconds last; UTC unless ``timezone``), once per
        tick however many workers run, for ``tenant`` or each of ``tenants`` (default: the
        tenant its arguments give, else the fallback tenant). Workers serving the job's queue
        enqueue it; a tick is enqueued while it is the latest and at most ``misfire_grace`` old
        (default: until the next tick). ``name``: the schedule's, shown by ``fairq stats``
        (default: the job's, with ``[tenant]`` for several tenants)."""
        found = declare_schedules(
            self.jobs, job, cron, tenant=tenant, tenants=tenants,
            fallback_tenant=self.fallback_tenant, args=args, kwargs=kwargs, name=name,
            misfire_grace=misfire_grace, timezone=timezone,
            max_payload_bytes=self.max_payload_bytes, declared=self.schedules,
        )  # fmt: skip
        self.schedules.update((schedule.name, schedule) for schedule in found)
        return found

    def publish(self) -> None:
        """Record the declared jobs in the store, so producers can enqueue them by name."""
        types = [d.job_type for d in self.jobs.values()]
        self.timed_backend.publish_job_types(PublishJobTypesParams(types=types))

    # -- enqueueing ------------------------------------------------------------------------

    def enqueue(
        self,
        name: str,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """Enqueue a job by name with JSON arguments; returns its id."""
        return self.enqueue_many([call_by_name(name, args, kwargs, options)])[0]

    def enqueue_many(self, calls: Iterable[Call]) -> list[str]:
        """Enqueue several jobs in one store transaction: all are stored, or none. A job whose
        unique key is held (docs/unique.md) is not stored: its id is the job's holding it."""
        return drive(enqueueing(self, calls), partial(performed, self))

    # -- tenants and queues ----------------------------------------------------------------

    def set_tenant(
        self,
        queue: str,
        tenant: str,
        *,
        weight: float | Keep | None = KEEP,
        max_running: int | Keep | None = KEEP,
        rate: Rate | str | Keep | None = KEEP,
    ) -> TenantStats:
        """Change a tenant's settings at run time; ``None`` returns one to the queue default.

        ``weight=0`` pauses the tenant: its jobs stay queued, nothing is lost. ``rate`` is a
        string like ``"100/minute"`` or a ``fairq.Rate`` (for a burst).
        """
        asked = params.tenant_settings(
            self.clock(), queue, tenant, weight=weight, max_running=max_running, rate=rate
        )
        return self.backend.set_tenant(asked)

    def set_queue(
        self,
        queue: str,
        *,
        weight: float | Keep = KEEP,
        max_running: int | Keep | None = KEEP,
        rate: Rate | str | Keep | None = KEEP,
        half_life: float | timedelta | Keep | None = KEEP,
        max_debt: float | timedelta | Keep = KEEP,
        max_in_flight: int | Keep | None = KEEP,
    ) -> None:
        """Change the defaults every tenant of ``queue`` gets unless it has its own, and the
        queue's own cap. Only the settings given change (read and written in one store
        transaction); ``None`` removes a cap, a rate or the half-life. A queue never set has
        weight 1, no caps, no rate, no half-life and a max debt of 60 s.

        ``half_life`` (seconds, or a ``timedelta`` like every duration) turns on history-aware
        fairness: a tenant's recent service decays instead of being forgotten when its queue
        drains, and a returning tenant starts behind by it, at most ``max_debt`` seconds of
        virtual time. ``max_in_flight`` caps the queue's jobs running at once, all tenants and
        workers together (e.g. to protect a downstream API); the fair order is unchanged.
        """
        asked = params.queue_settings(self.clock(), queue, weight=weight, max_running=max_running,
                                      rate=rate, half_life=half_life, max_debt=max_debt,
                                      max_in_flight=max_in_flight)  # fmt: skip
        self.backend.set_queue(asked)

    # -- inspection ------------------------------------------------------------------------

    def job_info(self, job_id: str) -> JobInfo | None:
        found = self.backend.get_jobs(GetJobsParams(ids=[job_id]))
        return found[0] if found else None

    def result(self, job_id: str, *, timeout: float | timedelta | None = None) -> Any:
        """The return value of a job declared with ``result_ttl``, once it succeeded; waits
        up to ``timeout`` seconds (None: as long as it takes) by reading the job again and
        again, at growing intervals (``fairq.results.poll_delays``: at most every 0.5 s).

        ResultTimeout when the time is up; JobFailed when the job is dead or cancelled (its
        last error in the message); NoResult when no job has that id or it keeps no result.
        """
        waiting = result_of(params.job_id(job_id), check_timeout(timeout))
        return drive(waiting, self._result_wants)

    def _result_wants(self, wanted: Wanted) -> Any:
        if isinstance(wanted, Pause):
            time.sleep(wanted.seconds)
            return None
        return self.backend.get_jobs(wanted)

    def cancel(self, job_id: str) -> CancelOutcome:
        """Cancel a job (docs/cancellation.md): a scheduled or ready one at once (CANCELLED);
        a running one is asked to stop (REQUESTED); a finished one (FINISHED) or an unknown
        id (UNKNOWN) is left as it is."""
        return self.cancel_many([job_id])[0]

    def cancel_many(self, ids: Sequence[str]) -> list[CancelOutcome]:
        """``cancel`` for each id, in one store call; the outcomes in the order given."""
        return list(self.timed_backend.cancel(params.cancel(self.clock(), ids)).outcomes)

    def stats(self, queue: str | None = None, tenant: str | None = None) -> list[TenantStats]:
        return self.backend.stats(params.stats(self.clock(), queue, tenant))

    def figures(self, queue: str | None = None, tenant: str | None = None) -> list[TenantFigures]:
        """Each (queue, tenant)'s recent wait and run-time histograms and ends by outcome."""
        return self.backend.figures(params.figures(self.clock(), queue, tenant))

    def tenant_report(
        self, queue: str | None = None, tenant: str | None = None
    ) -> list[TenantReport]:
        """Per (queue, tenant): why it is not running, its weight and its recent share.

        Throttling is judged from the jobs this app declares and those published to the store.
        """
        declared = [d.job_type for d in self.jobs.values()]
        filtered = params.tenant_filter(tenant)
        return tenant_report(self.backend, declared, queue, filtered, self.clock())

    def dead(
        self, queue: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> list[JobInfo]:
        return self.backend.list_dead(params.dead(queue, tenant, limit))

    def requeue(self, ids: Sequence[str]) -> int:
        """Give dead jobs a fresh set of attempts; returns how many were dead."""
        return self.backend.requeue(params.requeue(self.clock(), ids))
