"""fairq's router for plain Dramatiq actors (no relay; extra ``fairq[dramatiq]``).

A ``RoutedActor``'s messages go straight to the broker, as any actor's; fairq decides, in the
store, for the tenant the actor names:

* **where** (``throttle=``): at ``send``, fairq's throttle rules choose the queue, counting the
  send in the window native enqueues of the same job use (a rule matches when the count is
  over its threshold; the last match wins). A send with an explicit ``queue_name=`` is neither
  routed nor counted; Dramatiq's retries re-enqueue the message where it is, uncounted.
* **when** (``slots=True``): slots.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

import dramatiq
from dramatiq.broker import Broker

from fairq.contract import RouteParams
from fairq.errors import MissingTenant
from fairq.integrations.dramatiq.options import (
    DEFAULT_LEASE,
    LEASE_OPTION,
    MESSAGE_TENANT,
    SLOTS_OPTION,
    TENANT_OPTION,
    THROTTLE_OPTION,
)
from fairq.integrations.dramatiq.runs import fair_of
from fairq.policy.bounds import check_tenant

P = ParamSpec("P")
R = TypeVar("R")


class RoutedActor(dramatiq.Actor[P, R]):
    """A Dramatiq actor whose sends fairq routes by throttle rules and whose runs may take a
    tenant slot. Declare with ``@fair.routed_actor(tenant=…, throttle=[…], slots=…)``."""

    def __init__(
        self,
        fn: Any,
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
            self.job = fair.app.job(
                self.fn,
                name=actor_name,
                queue=queue_name,
                tenant=options.get(TENANT_OPTION),
                lease=options.get(LEASE_OPTION, DEFAULT_LEASE),
                throttle=options.get(THROTTLE_OPTION) or (),
            )
        except BaseException:
            broker.actors.pop(actor_name, None)
            raise
        self.slots = bool(options.get(SLOTS_OPTION))
        for rule in self.job.throttle:
            broker.declare_queue(rule.queue)  # so `dramatiq module` consumes it too

    def tenant_of(self, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
        """The tenant the actor's rule finds in a call; MissingTenant when there is none."""
        bound = self.job.check_arguments(args, kwargs)
        found = self.job.tenant_of(args, kwargs, bound)
        if found is None or found == "":
            raise MissingTenant(
                f"actor {self.actor_name!r} was sent without a tenant; declare "
                "@fair.routed_actor(tenant='arg_name') or send_with_options(…, fair_tenant='…')"
            )
        return check_tenant(found)

    def send_with_options(
        self,
        *,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        delay: timedelta | int | None = None,
        **options: Any,
    ) -> dramatiq.Message[R]:
        """Send as Dramatiq does, to the queue fairq's throttle rules choose (``queue_name=``:
        that queue, not counted)."""
        explicit = options.pop("queue_name", None)
        kwargs = dict(kwargs or {})
        given = options.pop(MESSAGE_TENANT, None)
        tenant = check_tenant(given) if given is not None else self.tenant_of(args, kwargs)
        if explicit is not None:
            queue = str(explicit)
        elif self.job.throttle:
            params = RouteParams(
                name=self.actor_name,
                tenant=tenant,
                queue=self.queue_name,
                rules=self.job.throttle,
                now=self.fair.app.clock(),
            )
            queue = self.fair.app.backend.route(params).queue
        else:
            queue = self.queue_name
        self.broker.declare_queue(queue)
        options[MESSAGE_TENANT] = tenant
        message = self.message_with_options(args=args, kwargs=kwargs, **options)
        if queue != self.queue_name:
            message = message.copy(queue_name=queue)
        if isinstance(delay, timedelta):
            delay = int(delay.total_seconds() * 1000)
        return self.broker.enqueue(message, delay=delay)
