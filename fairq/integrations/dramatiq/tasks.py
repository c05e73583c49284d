"""The fair actor: ``send`` stores the job in fairq, under its tenant; ``fairq relay`` publishes
it into the broker in fair order later (publish.py), and the worker claims it (runs.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

import dramatiq
from dramatiq.broker import Broker

from fairq.errors import ConfigError, MissingTenant
from fairq.integrations.dramatiq.options import TENANT_OPTION
from fairq.integrations.dramatiq.runs import fair_of

P = ParamSpec("P")
R = TypeVar("R")


class FairActor(dramatiq.Actor[P, R]):
    """A Dramatiq actor whose ``send``/``send_with_options`` store the job in fairq.

    Use ``@fair.actor(...)``, or ``@dramatiq.actor(actor_class=FairActor, fair_tenant=…)``
    on a broker that has a ``FairDramatiq``. ``delay=`` (milliseconds or a timedelta) keeps
    the job in fairq until it is due; ``fair_tenant=`` names its tenant. Calling the actor
    runs it here, as for any actor; ``message()`` builds a plain message (see the docs on
    pipelines).
    """

    relayed = True  # its messages carry a ticket (runs.py warns of one without)

    def __init__(
        self,
        fn: Callable[P, Any],
        *,
        broker: Broker,
        actor_name: str,
        queue_name: str,
        priority: int,
        options: dict[str, Any],
    ) -> None:
        fair = fair_of(broker)
        super().__init__(
            fn,
            broker=broker,
            actor_name=actor_name,
            queue_name=queue_name,
            priority=priority,
            options=options,
        )
        self.fair = fair
        try:
            self.job = fair.declare(self)
        except BaseException:
            broker.actors.pop(actor_name, None)  # a bad declaration leaves no half-made actor
            raise

    def send_with_options(
        self,
        *,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        delay: timedelta | int | None = None,
        **options: Any,
    ) -> dramatiq.Message[R]:
        """Store the job in fairq; returns a message whose ``message_id`` is the fairq job id
        (the message the relay publishes later carries the same id)."""
        tenant = options.pop(TENANT_OPTION, None)
        if options:
            raise ConfigError(
                f"fair actor {self.actor_name!r}: message option(s) {', '.join(sorted(options))} "
                "cannot travel through fairq, which stores the arguments only; set them on the "
                "actor instead (@fair.actor(…, option=…)); per message, fair_tenant= and delay= "
                "are taken"
            )
        seconds: float | timedelta | None
        if delay is None or isinstance(delay, timedelta):
            seconds = delay
        elif isinstance(delay, bool) or not isinstance(delay, (int, float)):
            raise ConfigError(f"delay must be milliseconds or a timedelta, got {delay!r}")
        else:
            seconds = delay / 1000
        kwargs = dict(kwargs or {})
        try:
            job_id = self.fair.app.enqueue(
                self.actor_name, args, kwargs, tenant=tenant, delay=seconds
            )
        except MissingTenant as exc:
            rule = self.job.tenant_rule
            if rule is None:
                why = "the actor names no tenant argument"
            elif isinstance(rule, str):
                why = f"its tenant argument {rule!r} is missing or empty"
            else:
                why = str(exc)
            raise MissingTenant(
                f"fair actor {self.actor_name!r} was sent without a tenant: {why}; declare "
                "@fair.actor(tenant='arg_name') or send_with_options(…, fair_tenant='…')"
            ) from None
        return dramatiq.Message(
            queue_name=self.queue_name,
            actor_name=self.actor_name,
            args=tuple(args),
            kwargs=kwargs,
            options={},
            message_id=job_id,
        )
