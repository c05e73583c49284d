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
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

try:
    import celery
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "fairq.integrations.celery needs Celery: pip install 'fairq[celery]'"
    ) from exc

from fairq.app import App
from fairq.app.declare import JobDefinition
from fairq.errors import ConfigError
from fairq.integrations.celery.calls import signature_holder
from fairq.integrations.celery.publish import CeleryPublisher
from fairq.integrations.celery.router import FairRouter
from fairq.integrations.celery.slots import SlotTask, wake
from fairq.integrations.celery.tasks import FairTask
from fairq.integrations.slots import SlotKeeper
from fairq.policy.throttle import Throttle
from fairq.relay import RelayedRuns

__all__ = ["CeleryPublisher", "FairCelery", "FairRouter", "FairTask", "SlotTask"]


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
