"""fairq's router and tenant slots for plain Dramatiq actors (no relay; extra ``fairq[dramatiq]``).

A ``RoutedActor``'s messages go straight to the broker, as any actor's; fairq only decides two
things, in the store, for the tenant the actor names:

* **where** (``throttle=``): at ``send``, fairq's throttle rules choose the queue, counting the
  send in the window native enqueues of the same job use (a rule matches when the count is
  over its threshold; the last match wins). A send with an explicit ``queue_name=`` is neither
  routed nor counted; Dramatiq's retries re-enqueue the message where it is, uncounted.
* **when** (``slots=True``): a worker runs a message only while it holds one of the tenant's
  slots in the actor's queue (at most the tenant's ``max_running``, set with
  ``fair.app.set_tenant``). A message of a tenant at its cap waits in the tenant's line in
  the store, and the worker that releases a slot sends the oldest waiting one again at once;
  a timed copy is also put back in the broker, due when a slot's lease ends, in case no
  release comes (fairq/integrations/slots.py). No retry is spent; the slot is renewed while
  the actor runs and released when it ends or raises; a killed worker's slot ends with its
  lease.
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

from fairq.contract import RouteParams, Woken
from fairq.errors import MissingTenant
from fairq.integrations.slots import SlotKeeper, fallback, turn
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
#: Message options of a waiting job's copies: its place in line, and whether a release woke it.
WAITER = "fair_waiter"
WOKEN = "fair_woken"
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
        self.keeper = SlotKeeper(fair.runs.backend, fair.app.clock, self.wake)
        self._tokens: dict[int, str] = {}  # id(message) -> its slot's token
        self._lock = threading.Lock()

    def wants(self, broker: Broker, message: MessageProxy) -> RoutedActor[Any, Any] | None:
        found = broker.actors.get(message.actor_name)
        return found if isinstance(found, RoutedActor) and found.slots else None

    def take(self, broker: Broker, actor: RoutedActor[Any, Any], message: MessageProxy) -> None:
        """Hold a slot for ``message``; or park it in its tenant's line, put a timed copy back
        and skip it; or skip a copy that must not run (SlotKeeper)."""
        given = message.options.get(MESSAGE_TENANT)
        now = self.keeper.clock()
        lease = actor.job.lease_timeout
        woken = bool(message.options.get(WOKEN))
        plain = message.copy(options={WOKEN: False})  # what a release sends again, marked
        try:
            tenant = given if given is not None else actor.tenant_of(message.args, message.kwargs)
            result = self.keeper.acquire(
                actor.queue_name,
                tenant,
                self.holder,
                lease,
                waiter=message.options.get(WAITER),
                park=plain.encode().decode(),
            )
        except Exception as exc:  # not run unguarded: a failed attempt, for Dramatiq's Retries
            raise SlotBusy(f"no tenant slot could be taken: {describe(exc)}") from exc
        verdict = turn(result, woken)
        if verdict == "run":
            if woken:
                log.info(
                    "message %s of tenant %r started: woken by a freed slot",
                    message.message_id,
                    tenant,
                )
            with self._lock:
                self._tokens[id(message)] = result.token  # type: ignore[assignment]
            return
        if verdict == "drop":
            why = "another copy ran" if result.gone else "no free slot; back in line"
            raise SkipMessage(f"message {message.message_id}: copy dropped ({why})")
        deferrals = int(message.options.get(DEFERRALS, 0))
        wait = fallback(result, deferrals, now, DEFER_FIRST, DEFER_MOST)
        timed = plain.copy(options={DEFERRALS: deferrals + 1, WAITER: result.waiter})
        try:
            broker.enqueue(timed, delay=int(wait * 1000))
        except Exception as exc:
            raise SlotBusy(
                f"tenant {tenant!r} is at its cap in queue {actor.queue_name!r} and the message "
                f"could not be put back ({describe(exc)})"
            ) from exc
        log.info(
            "message %s of tenant %r deferred: no free slot in queue %r; waits in line, timed "
            "copy in %.2f s (deferral %d)",
            message.message_id,
            tenant,
            actor.queue_name,
            wait,
            deferrals + 1,
        )
        raise SkipMessage(f"tenant {tenant!r} has no free slot; waits in line")

    def wake(self, woken: Woken) -> None:
        """Send again a message a release woke, marked (its place, woken)."""
        message = dramatiq.Message.decode(woken.park.encode())
        self.fair.broker.enqueue(message.copy(options={WAITER: woken.place, WOKEN: True}))

    def give_back(self, message: MessageProxy) -> None:
        with self._lock:
            token = self._tokens.pop(id(message), None)
        self.keeper.release(token)

    def close(self) -> None:
        self.keeper.close()
