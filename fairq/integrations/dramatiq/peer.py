"""fairq's router and tenant slots for plain Dramatiq actors (no relay; extra ``fairq[dramatiq]``).

A ``RoutedActor``'s messages go straight to the broker, as any actor's; fairq only decides two
things, in the store, for the tenant the actor names:

* **where** (``throttle=``): at ``send``, fairq's throttle rules choose the queue, counting the
  send in the window native enqueues of the same job use (a rule matches when the count is
  over its threshold; the last match wins). A send with an explicit ``queue_name=`` is neither
  routed nor counted; Dramatiq's retries re-enqueue the message where it is, uncounted.
* **when** (``slots=True``): a worker runs a message only while it holds one of the tenant's
  slots in the actor's queue (at most the tenant's ``max_running``, set with
  ``fair.app.set_tenant``). A message of a tenant at its cap is put back in the broker with a
  delay (doubling from 0.1 s to 5 s, never past the moment a slot's lease ends), without
  spending a retry; the slot is renewed while the actor runs and released when it ends or
  raises; a killed worker's slot ends with its lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

import dramatiq
from dramatiq.broker import Broker, MessageProxy
from dramatiq.middleware import MiddlewareError, SkipMessage

from fairq.contract import RouteParams
from fairq.errors import MissingTenant
from fairq.integrations.slots import SlotKeeper
from fairq.policy.bounds import check_tenant
from fairq.worker.joblog import describe

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("fairq.integrations.dramatiq")

#: Actor option: guard this actor's runs with tenant slots.
SLOTS_OPTION = "fair_slots"
#: Message option: the tenant a RoutedActor's send found (the slot guard reads it).
MESSAGE_TENANT = "fair_tenant"
#: Message option: how often a message was put back for want of a slot (not a retry).
DEFERRALS = "fair_deferrals"
DEFER_FIRST = 0.1
DEFER_MOST = 5.0


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
        from fairq.integrations.dramatiq import (
            DEFAULT_LEASE,
            LEASE_OPTION,
            TENANT_OPTION,
            THROTTLE_OPTION,
            FairDramatiq,
        )

        fair = FairDramatiq.of(broker)
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


class SlotBusy(MiddlewareError):
    """A guarded message that cannot run now and could not be deferred (no tenant, the store
    or the broker unreachable): a failed attempt, retried by Dramatiq's Retries."""


class SlotGuard:
    """The worker side of tenant slots: take one before a RoutedActor(slots=True) runs, renew
    it while it runs, release it after. Used by FairMiddleware."""

    def __init__(self, fair: Any) -> None:
        self.fair = fair
        self.holder = f"dramatiq-{socket.gethostname()}-{os.getpid()}"
        self.keeper = SlotKeeper(fair.runs.backend, fair.app.clock)
        self._tokens: dict[int, str] = {}  # id(message) -> its slot's token
        self._lock = threading.Lock()

    def wants(self, broker: Broker, message: MessageProxy) -> RoutedActor[Any, Any] | None:
        found = broker.actors.get(message.actor_name)
        return found if isinstance(found, RoutedActor) and found.slots else None

    def take(self, broker: Broker, actor: RoutedActor[Any, Any], message: MessageProxy) -> None:
        """Hold a slot for ``message``, or put the message back with a delay and skip it."""
        given = message.options.get(MESSAGE_TENANT)
        now = self.keeper.clock()
        lease = actor.job.lease_timeout
        try:
            tenant = given if given is not None else actor.tenant_of(message.args, message.kwargs)
            result = self.keeper.acquire(actor.queue_name, tenant, self.holder, lease)
        except Exception as exc:  # not run unguarded: a failed attempt, for Dramatiq's Retries
            raise SlotBusy(f"no tenant slot could be taken: {describe(exc)}") from exc
        if result.token is not None:
            with self._lock:
                self._tokens[id(message)] = result.token
            return
        deferrals = int(message.options.get(DEFERRALS, 0))
        wait = min(DEFER_FIRST * 2**deferrals, DEFER_MOST)
        if result.free_at is not None:
            wait = max(min(wait, result.free_at - now), DEFER_FIRST)
        try:
            broker.enqueue(message.copy(options={DEFERRALS: deferrals + 1}), delay=int(wait * 1000))
        except Exception as exc:
            raise SlotBusy(
                f"tenant {tenant!r} is at its cap in queue {actor.queue_name!r} and the message "
                f"could not be put back ({describe(exc)})"
            ) from exc
        raise SkipMessage(f"tenant {tenant!r} has no free slot; back in {wait:.1f} s")

    def give_back(self, message: MessageProxy) -> None:
        with self._lock:
            token = self._tokens.pop(id(message), None)
        self.keeper.release(token)

    def close(self) -> None:
        self.keeper.close()
