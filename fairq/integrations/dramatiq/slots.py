"""Tenant slots for plain Dramatiq actors (``routed_actor(slots=True)``, no relay): a worker
runs a message only while it holds one of the tenant's slots in the actor's queue (at most the
tenant's ``max_running``, set with ``fair.app.set_tenant``). A message of a tenant at its cap
waits in the tenant's line in the store, and the worker that releases a slot sends the oldest
waiting one again at once; a timed copy is also put back in the broker, due when a slot's
lease ends, in case no release comes (fairq/integrations/slots.py). No retry is spent; the
slot is renewed while the actor runs and released when it ends or raises; a killed worker's
slot ends with its lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import TYPE_CHECKING, Any

import dramatiq
from dramatiq.broker import Broker, MessageProxy
from dramatiq.middleware import MiddlewareError, SkipMessage

from fairq.contract import Woken
from fairq.integrations.dramatiq.options import MESSAGE_TENANT
from fairq.integrations.dramatiq.router import RoutedActor
from fairq.integrations.slots import SlotKeeper, fallback, turn
from fairq.worker.joblog import describe

if TYPE_CHECKING:
    from fairq.integrations.dramatiq import FairDramatiq

log = logging.getLogger("fairq.integrations.dramatiq")

#: Message option: how often a message was put back for want of a slot (not a retry).
DEFERRALS = "fair_deferrals"
#: Message options of a waiting job's copies: its place in line, and whether a release woke it.
WAITER = "fair_waiter"
WOKEN = "fair_woken"
DEFER_FIRST = 0.1
DEFER_MOST = 5.0


class SlotBusy(MiddlewareError):
    """A guarded message that cannot run now and could not be deferred (no tenant, the store
    or the broker unreachable): a failed attempt, retried by Dramatiq's Retries."""


class SlotGuard:
    """The worker side of tenant slots: take one before a RoutedActor(slots=True) runs, renew
    it while it runs, release it after. Used by FairMiddleware."""

    def __init__(self, fair: FairDramatiq) -> None:
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
        except Exception as exc:  # a failed attempt: Retries sends the message as it came
            carried = message.options.get(WAITER)
            if not self.keeper.leave(actor.queue_name, tenant, result.waiter, carried):
                raise SkipMessage(
                    f"message {message.message_id}: its timed copy was not sent, but a woken "
                    "copy runs it"
                ) from exc
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
