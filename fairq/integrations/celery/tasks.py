"""The fair Celery task: ``.delay()``/``apply_async`` store the job in fairq under its tenant
(the relay publishes it later, publish.py); its run is claimed and ended by ``RelayedCall``
(runs.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

import celery
from celery.utils.time import maybe_iso8601, maybe_make_aware

from fairq.errors import ConfigError, MissingTenant
from fairq.integrations.celery.runs import RelayedCall
from fairq.policy.throttle import Throttle
from fairq.relay import TICKET_KEY

if TYPE_CHECKING:
    from fairq.integrations.celery import FairCelery

#: apply_async options a fair task takes (``tenant`` is fairq's: the call's tenant).
SUPPORTED = ("countdown", "eta", "queue", "tenant")
#: Options about sending a message now; a fair call sends none (the relay does, later).
SENDING_ONLY = frozenset({"add_to_parent", "retry", "retry_policy"})


class FairTask(RelayedCall):
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
