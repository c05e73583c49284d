"""Fair scheduling for RQ: fair tasks wait in fairq and a relay releases them into RQ fairly.

* ``fair = FairRQ(redis_connection)`` is the integration object (``fairq relay module:fair``);
* ``@fair.task(queue=..., tenant=...)`` marks a function as fair and declares it as a fairq job
  named by its RQ import path;
* ``fair.queue(name)`` (a ``FairQueue``, an ``rq.Queue``) stores fair tasks in fairq from the
  ordinary ``enqueue``/``enqueue_call``/``enqueue_at``/``enqueue_in``/``enqueue_many`` calls,
  and enqueues every other function into RQ as before;
* the relay publishes each released job as a plain RQ job carrying its lease's ticket in
  ``job.meta``; the fair task's own wrapper, run by any RQ worker, claims the lease before
  the function runs (a stale copy is skipped), keeps it alive, and acks or fails it after.

Completion is reported by the function's wrapper, not by a Job/Worker class or RQ callbacks:
it needs no worker option, runs under every worker class, and sees the start (to skip stale
copies) as well as the end. A work horse that is killed reports nothing: the lease expires
and the relay releases the job again. RQ's own ``Retry`` is never used for fair tasks (the
relay publishes them without it): a failure goes back to fairq, which retries it with its
back-off, then makes it dead.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, ParamSpec, TypeVar

try:
    import redis
    from rq import Queue, get_current_job
    from rq.job import Job
    from rq.utils import utcparse
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("fairq.integrations.rq needs RQ: pip install 'fairq[rq]'") from exc

from fairq.app import App
from fairq.declare import Call, JobDefinition, Options, TenantRule
from fairq.errors import ConfigError, JobArgumentsError
from fairq.job import JobInfo, Lease, decode_payload
from fairq.policy.throttle import Throttle
from fairq.relay import TICKET_KEY, RelayedRuns, UnknownTask, ticket_of

__all__ = ["FairQueue", "FairRQ", "FairTask", "Held", "RQPublisher"]

log = logging.getLogger("fairq.integrations.rq")

P = ParamSpec("P")
R = TypeVar("R")

#: Set in ``job.meta`` of a relayed RQ job whose lease was no longer held (an older copy).
SKIPPED_KEY = "fairq_skipped"

#: Every fair task of this process by name, for ``enqueue("module.function")`` by string.
_BY_NAME: dict[str, FairTask] = {}
#: The RQ job whose lease this context claimed (a fair task calling another directly runs it
#: plainly: only the outermost call owns the ticket).
_claimed: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fairq_rq_claimed", default=None
)


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
        self.serializer = serializer
        self.tasks: dict[str, FairTask] = {}
        self._runs: RelayedRuns | None = None
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
            name = _import_path(fn)
            known = _BY_NAME.get(name)
            if known is not None and known.owner is not self:
                raise ConfigError(f"{name!r} is already a fair task of another FairRQ")
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

            @functools.wraps(fn)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
                return self._call(task, fn, args, kwargs)

            wrapper.fairq_task = task  # type: ignore[attr-defined]
            self.tasks[name] = task
            _BY_NAME[name] = task
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
                run_at=_aware(run_at),
            )
            built.append(Call(each.name, tuple(args or ()), dict(kwargs or {}), options))
        ids = self.app.enqueue_many(built)
        return [Held(i, c.name, queue, self.app) for i, c in zip(ids, built, strict=True)]

    # -- running (inside the RQ worker) -----------------------------------------------------

    def _call(
        self, task: FairTask, fn: Callable[..., R], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> R:
        """Run ``fn``; when this is the RQ job the relay published for it, under its lease."""
        job = get_current_job()
        ticket = job.meta.get(TICKET_KEY) if job is not None else None
        if (
            job is None
            or not isinstance(ticket, Mapping)
            or ticket.get("name") != task.name
            or _claimed.get() == job.id
        ):
            if job is not None and ticket is None and job.func_name == task.name:
                log.warning(
                    "fair task %s ran as RQ job %s without fairq (enqueued with a plain "
                    "rq.Queue?): use FairRQ.queue(...) so it is scheduled fairly",
                    task.name,
                    job.id,
                )
            return fn(*args, **kwargs)
        run = self.runs.begin(ticket)
        if run is None:  # an older copy of a job released again: it must not run
            job.meta[SKIPPED_KEY] = True
            job.save_meta()  # type: ignore[no-untyped-call]
            return None  # type: ignore[return-value]
        token = _claimed.set(job.id)
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            _report(run.failed, exc)
            raise
        finally:
            _claimed.reset(token)
        _report(run.succeeded)
        return result


def _report(end: Callable[..., object], *args: Any) -> None:
    """Store a job's end; a store that does not take it leaves the lease to expire (the job
    runs again: at-least-once), which is logged, not raised into RQ."""
    try:
        end(*args)
    except Exception:
        log.exception("could not store the end of a relayed job; its lease will expire")


class FairQueue(Queue):
    """An ``rq.Queue`` whose fair tasks go to fairq (the relay releases them into this queue
    when their turn comes); other functions are enqueued into RQ as usual.

    For a fair task the enqueue calls return a ``Held`` (the fairq job id in ``.id``), not an
    ``rq.job.Job``: the RQ job does not exist until the relay releases it.
    """

    def enqueue_call(  # type: ignore[override]
        self,
        func: Any,
        args: tuple[Any, ...] | list[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        *rest: Any,
        **options: Any,
    ) -> Job | Held:
        task = fair_task_of(func)
        if task is None:
            return super().enqueue_call(func, args, kwargs, *rest, **options)
        if rest:
            raise ConfigError(
                f"fair task {task.name!r}: pass RQ's options by name, not by position"
            )
        _refuse_rq_options(task, options)
        return task.owner.hold(task, self.name, args, kwargs)

    def enqueue_at(self, datetime: datetime, f: Any, *args: Any, **kwargs: Any) -> Job | Held:
        task = fair_task_of(f)
        if task is None:
            job: Job = super().enqueue_at(datetime, f, *args, **kwargs)
            return job
        fn_args, fn_kwargs = _split_call(task, args, kwargs)
        return task.owner.hold(task, self.name, fn_args, fn_kwargs, run_at=datetime)

    def enqueue_in(  # type: ignore[override]
        self, time_delta: timedelta, func: Any, *args: Any, **kwargs: Any
    ) -> Job | Held:
        task = fair_task_of(func)
        if task is None:
            return super().enqueue_in(time_delta, func, *args, **kwargs)
        if not isinstance(time_delta, timedelta):
            raise ConfigError(f"enqueue_in needs a timedelta, got {time_delta!r}")
        fn_args, fn_kwargs = _split_call(task, args, kwargs)
        return task.owner.hold(task, self.name, fn_args, fn_kwargs, delay=time_delta)

    def enqueue_many(  # type: ignore[override]
        self, job_datas: Iterable[Any], pipeline: Any = None, group_id: str | None = None
    ) -> list[Job] | list[Held]:
        """Fair tasks all go to fairq in one transaction; mixing them with other functions in
        one call is refused (they would not be stored atomically together)."""
        datas = list(job_datas)
        tasks = [fair_task_of(data.func) for data in datas]
        if not any(tasks):
            return super().enqueue_many(datas, pipeline=pipeline, group_id=group_id)
        if not all(tasks):
            raise ConfigError(
                "enqueue_many got fair tasks and other functions together; enqueue them in "
                "two calls (fair tasks are stored in fairq, the others in RQ)"
            )
        if pipeline is not None or group_id is not None:
            raise ConfigError("fair tasks take no pipeline or group_id (they are stored in fairq)")
        fair = [t for t in tasks if t is not None]
        owners = {id(t.owner) for t in fair}
        if len(owners) > 1:
            raise ConfigError("enqueue_many got fair tasks of several FairRQ objects")
        for task, data in zip(fair, datas, strict=True):
            _refuse_rq_options(task, data._asdict())
        calls = [(data.args, data.kwargs) for data in datas]
        return fair[0].owner.hold_many(fair, self.name, calls)

    def enqueue_job(self, job: Job, *args: Any, **kwargs: Any) -> Job:
        task = _BY_NAME.get(job.func_name or "")
        if task is not None:
            raise ConfigError(
                f"{task.name!r} is a fair task: enqueue it with queue.enqueue(...) (fairq holds "
                "it until its turn), not as a prepared rq Job"
            )
        enqueued: Job = super().enqueue_job(job, *args, **kwargs)
        return enqueued


class RQPublisher:
    """Publishes released jobs as RQ jobs (``fairq.relay.Publisher``)."""

    def __init__(self, fair: FairRQ) -> None:
        self.fair = fair
        self._queues: dict[str, Queue] = {}

    def _queue(self, name: str) -> Queue:
        if name not in self._queues:
            self._queues[name] = Queue(
                name, connection=self.fair.connection, serializer=self.fair.serializer
            )
        return self._queues[name]

    def publish(self, lease: Lease) -> None:
        task = self.fair.tasks.get(lease.name)
        if task is None:
            raise UnknownTask(
                f"no fair RQ task named {lease.name!r} in this relay's source ({self.fair!r}); "
                "it was renamed or removed, or its module is not imported by the module the "
                "relay loads"
            )
        args, kwargs = decode_payload(lease.payload)
        self._queue(lease.queue).enqueue_call(
            func=lease.name,
            args=args,
            kwargs=kwargs,
            job_id=f"{lease.job_id}-{uuid.uuid4().hex[:12]}",
            meta={TICKET_KEY: ticket_of(lease)},
            timeout=task.job_timeout,
            result_ttl=task.result_ttl,
            failure_ttl=task.failure_ttl,
        )

    def backlog_age(self, queue: str) -> float | None:
        """Seconds the oldest job waiting in RQ's ``queue`` has waited (0.0: none waits);
        None when RQ cannot tell (the broker is down, the job vanished meanwhile)."""
        rq_queue = self._queue(queue)
        try:
            first = self.fair.connection.lindex(rq_queue.key, 0)
            if first is None:
                return 0.0
            job_id = first.decode() if isinstance(first, bytes) else str(first)
            stamp = self.fair.connection.hget(rq_queue.job_class.key_for(job_id), "enqueued_at")
        except redis.RedisError:
            return None
        if not stamp:
            return None
        enqueued = utcparse(stamp.decode() if isinstance(stamp, bytes) else str(stamp))
        if enqueued.tzinfo is None:  # RQ before 2.x wrote naive UTC
            enqueued = enqueued.replace(tzinfo=timezone.utc)
        return max(0.0, time.time() - enqueued.timestamp())


def fair_task_of(func: object) -> FairTask | None:
    """The fair task a function (or its RQ import path) is, or None."""
    if isinstance(func, str):
        return _BY_NAME.get(func)
    task = getattr(func, "fairq_task", None)
    return task if isinstance(task, FairTask) else None


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


def _split_call(
    task: FairTask, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Sequence[Any] | None, dict[str, Any] | None]:
    """A call's own arguments, the way RQ's ``enqueue`` reads them (its keywords are RQ's; an
    explicit ``args=``/``kwargs=`` pair holds the function's), refusing RQ options."""
    kwargs = dict(kwargs)
    options = {name: kwargs.pop(name) for name in _RQ_KEYWORDS if name in kwargs}
    _refuse_rq_options(
        task, {"timeout" if k == "job_timeout" else k: v for k, v in options.items()}
    )
    if "args" in kwargs or "kwargs" in kwargs:
        if args:
            raise ConfigError(
                "give the function's arguments positionally or as args=/kwargs=, not both"
            )
        return kwargs.pop("args", None), kwargs.pop("kwargs", None)
    return args, kwargs


def _refuse_rq_options(task: FairTask, options: Mapping[str, Any]) -> None:
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


def _import_path(fn: Callable[..., Any]) -> str:
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


def _aware(when: datetime | None) -> datetime | None:
    """RQ reads a naive datetime as local time; fairq needs an aware one."""
    if when is None:
        return None
    if not isinstance(when, datetime):
        raise ConfigError(f"enqueue_at needs a datetime, got {when!r}")
    return when if when.tzinfo is not None else when.astimezone()
