"""Fair scheduling for Celery tasks: ``.delay()`` stores the job in fairq, ``fairq relay``
releases it into the broker in fair order, the task's own ``__call__`` reports its end.

::

    fair = FairCelery(celery_app, url="redis://localhost:6379/0")

    @celery_app.task(base=fair.Task, fair_tenant="account_id")
    def import_csv(account_id, path): ...

    import_csv.delay("acme", "s3://…/a.csv")   # stored in fairq, not sent to the broker

Run ``fairq relay tasks:fair`` next to the Celery workers. The task's options ``fair_*``
(``fair_tenant``, ``fair_queue``, ``fair_max_attempts``, ``fair_lease``, ``fair_cost``,
``fair_retry_base``, ``fair_throttle``) are those of ``fairq.App.job``; the fairq queue is also
the Celery queue the relay publishes into. ``fair.task(tenant=…)`` is the same, shorter.

Retries are fairq's: a relayed run that raises is stored as a failed attempt (fairq's back-off,
then dead after ``fair_max_attempts``) and Celery records it as RETRY, or FAILURE once dead;
``self.retry()`` and ``autoretry_for`` hand the job back the same way instead of re-sending it.

Without the relay, ``fair.router`` (router.py) throttles by re-routing and
``fair.SlotTask`` (slots.py) caps a tenant's running jobs with leased slots.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

try:
    import celery
    from celery.exceptions import Ignore, Retry
    from celery.utils.time import maybe_iso8601, maybe_make_aware
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "fairq.integrations.celery needs Celery: pip install 'fairq[celery]'"
    ) from exc

from fairq.app import App
from fairq.declare import JobDefinition
from fairq.errors import ConfigError, MissingTenant
from fairq.integrations.celery.calls import signature_holder
from fairq.integrations.celery.publish import CeleryPublisher
from fairq.integrations.celery.router import FairRouter
from fairq.integrations.celery.slots import SlotTask, wake
from fairq.integrations.slots import SlotKeeper
from fairq.job import JobState
from fairq.policy.throttle import Throttle
from fairq.relay import TICKET_KEY, RelayedRuns

__all__ = ["CeleryPublisher", "FairCelery", "FairRouter", "FairTask", "SlotTask"]

log = logging.getLogger("fairq.integrations.celery")

#: apply_async options a fair task takes (``tenant`` is fairq's: the call's tenant).
SUPPORTED = ("countdown", "eta", "queue", "tenant")
#: Options about sending a message now; a fair call sends none (the relay does, later).
SENDING_ONLY = frozenset({"add_to_parent", "retry", "retry_policy"})


class FairTask(celery.Task):  # type: ignore[misc]  # Celery ships no type hints
    """The behaviour of ``FairCelery(...).Task``: enqueue into fairq, run under a lease.

    Set on the task (``@celery_app.task(base=fair.Task, fair_tenant=…)``): ``fair_tenant``
    (the argument holding the tenant, or a callable of the task's arguments), ``fair_queue``
    (default: the task's ``queue``, else Celery's default queue), ``fair_max_attempts``,
    ``fair_lease``, ``fair_cost``, ``fair_retry_base``, ``fair_throttle``.
    """

    fair: ClassVar[FairCelery]
    fair_tenant: ClassVar[str | Callable[..., object] | None] = None
    fair_queue: ClassVar[str | None] = None
    fair_max_attempts: ClassVar[int] = 3
    fair_lease: ClassVar[float | timedelta] = 60.0
    fair_cost: ClassVar[float | timedelta] = 1.0
    fair_retry_base: ClassVar[float | timedelta] = 1.0
    fair_throttle: ClassVar[Sequence[Throttle]] = ()

    @classmethod
    def on_bound(cls, app: celery.Celery) -> None:
        """Declare the task as a fairq job as soon as Celery makes it (a bad ``fair_*``
        option fails at import or at the app's finalize, not at the first call)."""
        super().on_bound(app)
        # Not fair.Task itself, nor an abstract base made from it; and not another app's copy
        # (Celery adds shared tasks to every app it finalizes: used there, it fails at the call).
        if cls.name is not None and app is cls.fair.celery:
            cls.fair.declare(cls, app)

    # -- the producer side -----------------------------------------------------------------

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        task_id: str | None = None,
        producer: Any = None,
        link: Any = None,
        link_error: Any = None,
        shadow: str | None = None,
        **options: Any,
    ) -> Any:
        """Store the call in fairq (its id is the Celery task id); the relay sends it when
        the fair order gets to it. The relay's own send carries the ticket and goes through."""
        headers = options.get("headers")
        relayed = isinstance(headers, dict) and TICKET_KEY in headers
        if relayed or self.app.conf.task_always_eager:
            return super().apply_async(
                args, kwargs, task_id, producer, link, link_error, shadow, **options
            )
        given = {
            "task_id": task_id,
            "producer": producer,
            "link": link,
            "link_error": link_error,
            "shadow": shadow,
        }
        refused = sorted([k for k, v in given.items() if v is not None])
        refused += sorted(k for k in options if k not in SUPPORTED and k not in SENDING_ONLY)
        if refused:
            raise ConfigError(
                f"fair task {self.name!r}: apply_async option(s) {', '.join(refused)} cannot "
                f"be used: a fair call is stored in fairq (arguments only) and sent later by "
                f"the relay. Supported: {', '.join(SUPPORTED)}; chains, groups, chords and "
                "links are not (call the next task from inside this one instead)"
            )
        fairq_options: dict[str, Any] = {}
        if options.get("tenant") is not None:
            fairq_options["tenant"] = options["tenant"]
        queue = options.get("queue")
        if queue is not None:
            fairq_options["queue"] = queue if isinstance(queue, str) else queue.name
        countdown, eta = options.get("countdown"), options.get("eta")
        if countdown is not None and eta is not None:
            raise ConfigError(f"fair task {self.name!r}: give countdown or eta, not both")
        if countdown is not None:
            fairq_options["delay"] = countdown
        if eta is not None:
            fairq_options["run_at"] = self._aware(eta)
        self.fair.definition(self)
        try:
            job_id = self.fair.app.enqueue(
                self.name, tuple(args or ()), dict(kwargs or {}), **fairq_options
            )
        except MissingTenant as exc:
            raise MissingTenant(
                f"fair task {self.name!r} has no tenant: declare the argument that holds it "
                "(fair_tenant='account_id', or a function of the arguments) or pass "
                "apply_async(…, tenant=…)"
            ) from exc
        return self.AsyncResult(job_id)

    def _aware(self, eta: object) -> object:
        """Celery's reading of an ``eta``: an ISO string is parsed, a naive time is in the
        app's timezone (UTC by default). Anything else is left to fairq to refuse."""
        if isinstance(eta, str):
            try:
                eta = maybe_iso8601(eta)
            except ValueError:
                raise ConfigError(
                    f"fair task {self.name!r}: eta {eta!r} is not an ISO 8601 time"
                ) from None
        if isinstance(eta, datetime):
            return maybe_make_aware(eta, self.app.timezone)
        return eta

    # -- the worker side -------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run a relayed message under its fairq lease: claim it (an older copy of a message
        the relay sent again is skipped), run, store the outcome."""
        ticket = self._ticket()
        if ticket is None:  # called directly, eagerly, or sent without the relay
            return super().__call__(*args, **kwargs)
        run = self.fair.runs.begin(ticket)
        if run is None:
            raise Ignore()  # said in the log by begin
        try:
            result = super().__call__(*args, **kwargs)
        except Ignore:
            run.succeeded()  # the task chose to end here
            raise
        except BaseException as exc:
            cause = exc.exc if isinstance(exc, Retry) and exc.exc is not None else exc
            info = run.failed(cause)
            if info is not None and info.state not in (JobState.DEAD, JobState.CANCELLED):
                when = datetime.fromtimestamp(info.run_at, tz=timezone.utc)
                raise Retry(
                    f"fairq retries it (attempt {info.attempts} of {info.max_attempts} failed)",
                    exc=cause,
                    when=when,
                ) from cause
            raise
        run.succeeded()
        return result

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: BaseException | None = None,
        throw: bool = True,
        eta: Any = None,
        countdown: Any = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        """fairq retries fair tasks: in a relayed run (and one sent without the relay) this
        ends the attempt with ``exc`` (or the exception being handled) instead of sending the
        task again; fairq's back-off and ``fair_max_attempts`` apply. Eager runs retry as
        Celery does."""
        if self.request.is_eager or self.request.called_directly:
            return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries, **options)
        cause = exc if exc is not None else sys.exc_info()[1]
        raise cause if cause is not None else Retry("the task asked to be retried")

    def _ticket(self) -> object | None:
        request = self.request
        if request.called_directly:
            return None
        ticket = getattr(request, TICKET_KEY, None)
        if ticket is None and isinstance(request.headers, dict):
            ticket = request.headers.get(TICKET_KEY)
        return ticket


class FairCelery:
    """Fair tasks of one Celery app, stored in one fairq store (``url``, or ``app``: a fairq
    App of your own). What ``fairq relay module:attribute`` runs from (a RelaySource)."""

    def __init__(
        self, celery_app: celery.Celery, url: str | None = None, *, app: App | None = None
    ) -> None:
        if not isinstance(celery_app, celery.Celery):
            raise ConfigError(f"FairCelery needs a celery.Celery app, got {celery_app!r}")
        if app is not None and url is not None:
            raise ConfigError("give FairCelery a store url or a fairq App, not both")
        self.celery = celery_app
        self.app = app if app is not None else App(url)
        self.runs = RelayedRuns(self.app)
        #: The task base class: ``@celery_app.task(base=fair.Task, fair_tenant=…)``.
        self.Task: type[FairTask] = type(
            "Task", (FairTask, celery_app.Task), {"fair": self, "__module__": __name__}
        )
        #: Tenant slots without the relay: ``@celery_app.task(base=fair.SlotTask, …)``.
        self.SlotTask: type[SlotTask] = type(
            "SlotTask", (SlotTask, celery_app.Task), {"fair": self, "__module__": __name__}
        )
        #: Throttling without the relay: ``celery_app.conf.task_routes = (fair.router,)``.
        self.router = FairRouter(self)
        self.slots = SlotKeeper(
            self.runs.backend, self.app.clock, functools.partial(wake, celery_app)
        )
        self._declared: set[str] = set()

    def task(
        self,
        *args: Any,
        tenant: str | Callable[..., object] | None = None,
        queue: str | None = None,
        max_attempts: int = 3,
        lease: float | timedelta = 60.0,
        cost: float | timedelta = 1.0,
        retry_base: float | timedelta = 1.0,
        throttle: Sequence[Throttle] = (),
        **options: Any,
    ) -> Any:
        """``@fair.task(tenant="account_id")``: ``celery_app.task`` with ``base=fair.Task``;
        other keyword arguments are Celery's task options."""
        if "base" in options:
            raise ConfigError("fair.task makes the task's base fair.Task; drop base=")
        fair_options = {
            "fair_tenant": tenant,
            "fair_queue": queue,
            "fair_max_attempts": max_attempts,
            "fair_lease": lease,
            "fair_cost": cost,
            "fair_retry_base": retry_base,
            "fair_throttle": throttle,
        }
        return self.celery.task(*args, base=self.Task, **fair_options, **options)

    # -- declarations ----------------------------------------------------------------------

    def declare(self, cls: type[FairTask], bound_to: celery.Celery) -> JobDefinition[Any, Any]:
        """Declare a fair task class as a fairq job of the same name (once)."""
        name = cls.name
        if bound_to is not self.celery:
            raise ConfigError(
                f"fair task {name!r} is bound to Celery app {bound_to.main!r}, but its base "
                f"fair.Task belongs to {self.celery.main!r}: use the FairCelery of that app"
            )
        if name in self._declared:
            return self.app.jobs[name]
        queue = cls.fair_queue or getattr(cls, "queue", None) or self.celery.conf.task_default_queue
        definition = self.app.job(
            signature_holder(cls),
            name=name,
            queue=queue if isinstance(queue, str) else queue.name,
            tenant=cls.fair_tenant,
            max_attempts=cls.fair_max_attempts,
            lease=cls.fair_lease,
            cost=cls.fair_cost,
            retry_base=cls.fair_retry_base,
            throttle=cls.fair_throttle,
        )
        self._declared.add(name)
        return definition

    def definition(self, task: FairTask) -> JobDefinition[Any, Any]:
        return self.declare(type(task), task.app)

    def fair_tasks(self) -> list[FairTask]:
        """Every fair task of the Celery app, after importing the modules Celery is told to
        (``include``, ``imports``, autodiscovery), as a worker would."""
        self.celery.loader.import_default_modules()
        return [t for t in self.celery.tasks.values() if isinstance(t, self.Task)]

    # -- RelaySource -----------------------------------------------------------------------

    def relay_queues(self) -> list[str]:
        """The fairq queues of the fair tasks, with the queues their throttle rules send to."""
        queues: list[str] = []
        for task in self.fair_tasks():
            definition = self.definition(task)
            for queue in (definition.queue, *(rule.queue for rule in definition.throttle)):
                if queue not in queues:
                    queues.append(queue)
        return queues

    def publisher(self) -> CeleryPublisher:
        """Raises ConfigError when the app's broker URL is not one Celery can use here."""
        self.fair_tasks()  # the task modules imported, so no known task looks unknown
        return CeleryPublisher(self)
