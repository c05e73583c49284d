"""``FairRQ``: fair tasks for one RQ setup, their enqueue into fairq and their runs in RQ."""

from __future__ import annotations

import functools
import importlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar

import redis

from fairq.app import App, Call, JobDefinition, Options
from fairq.app.declare import TenantRule
from fairq.backends import check_url, needs_extra
from fairq.errors import ConfigError, JobArgumentsError
from fairq.integrations.rq.calls import aware
from fairq.integrations.rq.publish import RQPublisher
from fairq.integrations.rq.queue import FairQueue
from fairq.integrations.rq.router import GuardedTask
from fairq.integrations.rq.router import register as register_guarded
from fairq.integrations.rq.runs import run_relayed
from fairq.integrations.rq.slots import run_in_slot, wake
from fairq.integrations.rq.tasks import FairTask, Held, import_path, register
from fairq.integrations.slots import SlotKeeper
from fairq.policy.bounds import check_int
from fairq.policy.queues import check_queue_name
from fairq.policy.throttle import Throttle, check_rules
from fairq.relay import RelayedRuns

log = logging.getLogger("fairq.integrations.rq")

P = ParamSpec("P")
R = TypeVar("R")


class FairRQ:
    """Fair tasks for one RQ setup: ``FairRQ(Redis(), url="redis://…/1")``.

    ``connection``: the Redis RQ uses (the relay publishes there). ``url``: the fairq store
    (default ``$FAIRQ_URL``), or ``app``: a fairq ``App`` of your own. ``serializer``: the one
    your RQ workers use (``rq worker -S``), for the jobs the relay publishes. The arguments of
    a fair task are JSON in fairq whatever RQ's serializer is.
    """

    def __init__(
        self,
        connection: redis.Redis,
        url: str | None = None,
        *,
        app: App | None = None,
        serializer: Any = None,
    ) -> None:
        if not isinstance(connection, redis.Redis):
            raise ConfigError(
                f"FairRQ needs the redis.Redis connection RQ uses, got {connection!r}"
            )
        if app is not None and url is not None:
            raise ConfigError("give FairRQ a store url or an app, not both")
        self.connection = connection
        self.app = app if app is not None else App(url)
        preload_store(self.app.url)
        self.serializer = serializer
        self.tasks: dict[str, FairTask] = {}
        self._runs: RelayedRuns | None = None
        self._keeper: SlotKeeper | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FairRQ(tasks={sorted(self.tasks)}, store={self.app.url!r})"

    # -- declaring -------------------------------------------------------------------------

    def task(
        self,
        *,
        tenant: TenantRule,
        queue: str = "default",
        max_attempts: int = 3,
        lease: float | timedelta = 60.0,
        cost: float | timedelta = 1.0,
        retry_base: float | timedelta = 1.0,
        throttle: Sequence[Throttle] = (),
        job_timeout: int | None = None,
        result_ttl: int | None = None,
        failure_ttl: int | None = None,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Mark a function fair: ``@fair.task(queue="imports", tenant="account_id")``.

        ``tenant``: the argument holding the tenant id, or a function of the call's arguments
        returning it. ``queue``: the RQ queue it runs in (also its fairq queue). The others are
        ``App.job``'s (``lease``: seconds without a heartbeat before the job comes back) and
        the RQ job options every release of it gets (``job_timeout``, ``result_ttl``,
        ``failure_ttl``). The function is returned wrapped; call it directly as before.
        """
        if tenant is None:
            raise ConfigError(
                "a fair task needs tenant=: the name of the argument holding the tenant id, or "
                "a function of the call's arguments that returns it"
            )
        rq_options = {
            "job_timeout": job_timeout,
            "result_ttl": result_ttl,
            "failure_ttl": failure_ttl,
        }
        for option, value in rq_options.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{option} must be whole seconds (an int) or None, got {value!r}")

        def declare(fn: Callable[P, R]) -> Callable[P, R]:
            name = import_path(fn)
            definition = self.app.job(
                fn,
                name=name,
                queue=queue,
                tenant=tenant,
                max_attempts=max_attempts,
                lease=lease,
                cost=cost,
                retry_base=retry_base,
                throttle=throttle,
            )
            task = FairTask(self, definition, job_timeout, result_ttl, failure_ttl)
            register(task)

            @functools.wraps(fn)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
                return run_relayed(self.runs, task, fn, args, kwargs)

            wrapper.fairq_task = task  # type: ignore[attr-defined]
            self.tasks[name] = task
            return wrapper

        return declare

    def guard(
        self,
        *,
        tenant: TenantRule,
        queue: str = "default",
        throttle: Sequence[Throttle] = (),
        slots: bool | int = False,
        slot_lease: float | timedelta = 60.0,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Keep a task in RQ (no relay) but apply fairq's rules to it:
        ``@fair.guard(queue="imports", tenant="account_id", throttle=[...], slots=True)``.

        ``throttle``: fairq.Throttle rules applied when it is enqueued into ``queue`` through a
        ``FairQueue`` (its RQ queue is then the last matching rule's). ``slots``: run a job
        only while its tenant holds a slot in the job's RQ queue: ``True`` caps at the
        tenant's ``max_running`` there (``fair.app.set_tenant``), ``N`` at N; a job without a
        free slot is deferred (``rq worker --with-scheduler`` must run). ``slot_lease``:
        seconds a slot outlives a worker that stopped renewing it. See fairq/integrations/rq/
        guard.py.
        """
        if tenant is None:
            raise ConfigError("a guarded task needs tenant=: the argument holding the tenant id")
        limit = None if isinstance(slots, bool) else check_int("slots", slots, least=1)
        if not throttle and slots is False:
            raise ConfigError("@fair.guard needs throttle= rules, slots=, or both")
        home = check_queue_name(queue)
        rules = check_rules(throttle, home, [rule.queue for rule in throttle])

        def declare(fn: Callable[P, R]) -> Callable[P, R]:
            definition = JobDefinition(
                self.app,
                fn,
                name=import_path(fn),
                queue=home,
                tenant=tenant,
                max_attempts=1,
                lease=slot_lease,
                cost=1.0,
                retry_base=1.0,
                throttle=rules,
            )
            task = GuardedTask(
                definition, self.runs, slots is not False, limit, definition.lease_timeout
            )
            register_guarded(task)

            @functools.wraps(fn)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
                result: R = run_in_slot(task, self._slots, fn, args, kwargs)
                return result

            wrapper.fairq_guard = task  # type: ignore[attr-defined]
            return wrapper

        return declare

    def queue(self, name: str = "default", **options: Any) -> FairQueue:
        """An RQ queue on this connection that stores fair tasks in fairq (``rq.Queue``'s
        options: ``default_timeout``, ``job_class``, …; the serializer is this object's)."""
        options.setdefault("serializer", self.serializer)
        return FairQueue(name, connection=self.connection, **options)

    # -- what `fairq relay` uses (fairq.relay.RelaySource) ----------------------------------

    def relay_queues(self) -> list[str]:
        """The queues of the fair tasks, with the queues their throttle rules send jobs to."""
        queues: set[str] = set()
        for task in self.tasks.values():
            queues.add(task.definition.queue)
            queues.update(rule.queue for rule in task.definition.throttle)
        return sorted(queues)

    def publisher(self) -> RQPublisher:
        return RQPublisher(self)

    @property
    def runs(self) -> RelayedRuns:
        """The relayed jobs running in this process (claimed, kept alive, ended)."""
        if self._runs is None:
            with self._lock:
                if self._runs is None:
                    self._runs = RelayedRuns(self.app)
        return self._runs

    @property
    def _slots(self) -> SlotKeeper:
        if self._keeper is None:
            runs = self.runs  # before the lock: ``runs`` takes it too
            with self._lock:
                if self._keeper is None:
                    wakes = functools.partial(wake, self.connection, self.serializer)
                    self._keeper = SlotKeeper(runs.backend, self.app.clock, wakes)
        return self._keeper

    # -- enqueueing (FairQueue calls these) -------------------------------------------------

    def hold(
        self,
        task: FairTask,
        queue: str,
        args: Sequence[Any] | None,
        kwargs: Mapping[str, Any] | None,
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
    ) -> Held:
        """Store one call of ``task`` in fairq (checked as a native enqueue is)."""
        return self.hold_many(task, queue, [(args, kwargs)], delay=delay, run_at=run_at)[0]

    def hold_many(
        self,
        task: FairTask | Sequence[FairTask],
        queue: str,
        calls: Sequence[tuple[Sequence[Any] | None, Mapping[str, Any] | None]],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
    ) -> list[Held]:
        """Store several calls in one transaction: all are stored, or none."""
        tasks = [task] * len(calls) if isinstance(task, FairTask) else list(task)
        built = []
        for each, (args, kwargs) in zip(tasks, calls, strict=True):
            if isinstance(args, (str, bytes)) or not isinstance(args, (Sequence, type(None))):
                raise JobArgumentsError(f"args must be a list or tuple, got {args!r}")
            options = Options(
                queue=None if queue == each.definition.queue else queue,
                delay=delay,
                run_at=aware(run_at),
            )
            built.append(Call(each.name, tuple(args or ()), dict(kwargs or {}), options))
        ids = self.app.enqueue_many(built)
        return [Held(i, c.name, queue, self.app) for i, c in zip(ids, built, strict=True)]


#: The module of each store kind, imported (not opened) by ``preload_store``.
_STORE_MODULES = {
    "sqlite": "fairq.backends.sqlite",
    "redis": "fairq.backends.redis",
    "postgresql": "fairq.backends.postgres",
}


def preload_store(url: str) -> None:
    """Import the store's client now, opening nothing: RQ forks a work horse per job, and a
    worker that imported the tasks module (``rq worker -c tasks``) then hands every horse the
    client instead of each importing it again (psycopg: about half a second per job); with the
    module's ``preload`` when it has one (the store's own per-process set-up, done once here)."""
    kind = check_url(url)
    if kind in _STORE_MODULES:
        with needs_extra(kind):
            module = importlib.import_module(_STORE_MODULES[kind])
        getattr(module, "preload", lambda url: None)(url)
