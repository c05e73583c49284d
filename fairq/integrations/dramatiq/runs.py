"""The worker side of relayed Dramatiq jobs: ``FairMiddleware`` claims a relayed message's
lease before it runs and ends it in fairq after (and hands plain actors' messages to the slot
guard, slots.py); ``FairRetries`` leaves relayed messages' retries to fairq."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from dramatiq.broker import Broker, MessageProxy
from dramatiq.middleware import Middleware, SkipMessage
from dramatiq.middleware.retries import Retries

from fairq.errors import ConfigError
from fairq.integrations.dramatiq.options import (
    COST_OPTION,
    LEASE_OPTION,
    SLOTS_OPTION,
    TENANT_OPTION,
    THROTTLE_OPTION,
)
from fairq.relay import TICKET_KEY, BadTicket, RelayedRun
from fairq.worker.joblog import describe

if TYPE_CHECKING:
    from fairq.integrations.dramatiq import FairDramatiq

log = logging.getLogger("fairq.integrations.dramatiq")


def fair_of(broker: Broker) -> FairDramatiq:
    """The FairDramatiq made for ``broker`` (its FairMiddleware's)."""
    for middleware in broker.middleware:
        if isinstance(middleware, FairMiddleware):
            return middleware.fair
    raise ConfigError(
        f"broker {broker!r} has no FairDramatiq: make fair = FairDramatiq(broker, url=…) "
        "before declaring fair actors (with @fair.actor or actor_class=FairActor)"
    )


class FairMiddleware(Middleware):
    """The worker side: claim a relayed message's lease before it runs, end it after.

    A message whose lease is no longer held (an older copy: the job was released again after
    its lease expired, or already ran) is skipped. A fair actor's message without a ticket
    (sent with ``broker.enqueue``, a pipeline or group, or before the actor was fair) runs as
    a plain Dramatiq message, with a warning.
    """

    def __init__(self, fair: FairDramatiq) -> None:
        self.fair = fair
        self._running: dict[int, RelayedRun] = {}  # by id() of the MessageProxy
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    @property
    def actor_options(self) -> set[str]:
        return {TENANT_OPTION, LEASE_OPTION, COST_OPTION, THROTTLE_OPTION, SLOTS_OPTION}

    def before_process_message(self, broker: Broker, message: MessageProxy) -> None:
        ticket = message.options.get(TICKET_KEY)
        if ticket is None:
            guarded = self.fair.slots.wants(broker, message)
            if guarded is not None:
                self.fair.slots.take(broker, guarded, message)
            else:
                self._warn_unticketed(broker, message)
            return
        try:
            run = self.fair.runs.begin(ticket)
        except BadTicket as exc:
            log.error("message %s not run: %s", message.message_id, exc)
            message.fail()  # to Dramatiq's dead letters: nobody can run it
            raise SkipMessage(str(exc)) from None
        except Exception as exc:
            log.error(
                "job %s not run: the fairq store could not be reached to claim it (%s); it is "
                "released again when its lease expires",
                message.message_id,
                describe(exc),
            )
            raise SkipMessage(describe(exc)) from None
        if run is None:
            raise SkipMessage("not to run: an older copy, or cancelled (see the fairq.relay log)")
        with self._lock:
            self._running[id(message)] = run

    def after_process_message(
        self,
        broker: Broker,
        message: MessageProxy,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        self.fair.slots.give_back(message)
        run = self._pop(message)
        if run is not None:
            self._end(run, exception)

    def after_skip_message(self, broker: Broker, message: MessageProxy) -> None:
        """A middleware after this one skipped a claimed job: a failed attempt in fairq."""
        self.fair.slots.give_back(message)
        run = self._pop(message)
        if run is not None:
            self._end(run, SkippedByMiddleware(f"message {message.message_id} was skipped"))

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        self.fair.slots.close()
        self.fair.runs.close()

    def _pop(self, message: MessageProxy) -> RelayedRun | None:
        with self._lock:
            return self._running.pop(id(message), None)

    def _end(self, run: RelayedRun, exception: BaseException | None) -> None:
        try:
            if exception is None:
                run.succeeded()
            else:
                run.failed(exception)
        except Exception as exc:
            log.error(
                "job %s: the fairq store did not take its end (%s); it runs again when its "
                "lease expires",
                run.lease.job_id,
                describe(exc),
            )

    def _warn_unticketed(self, broker: Broker, message: MessageProxy) -> None:
        if not getattr(broker.actors.get(message.actor_name), "relayed", False):
            return  # not a FairActor (tasks.py)
        if message.actor_name in self._warned:
            return
        self._warned.add(message.actor_name)
        log.warning(
            "fair actor %r got message %s without a fairq ticket (sent with broker.enqueue, a "
            "pipeline or group, or before the actor was fair): it runs as a plain Dramatiq "
            "message, outside fairq's order and caps (said once per actor)",
            message.actor_name,
            message.message_id,
        )


class SkippedByMiddleware(Exception):
    """A claimed fair job that another middleware skipped (e.g. AgeLimit): a failed attempt."""


class FairRetries(Retries):
    """Dramatiq's ``Retries``, leaving relayed messages to fairq, which retries them (so a
    failed fair job is never retried twice). Other messages are retried as before."""

    def after_process_message(
        self,
        broker: Broker,
        message: MessageProxy,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        if TICKET_KEY in message.options:
            return
        super().after_process_message(  # type: ignore[no-untyped-call]  # untyped upstream
            broker, message, result=result, exception=exception
        )


def take_over_retries(broker: Broker) -> Retries | None:
    """Swap the broker's ``Retries`` for a ``FairRetries`` with the same settings; the one
    now in place (None: the broker retries nothing)."""
    found: Retries | None = None
    for i, middleware in enumerate(broker.middleware):
        if isinstance(middleware, FairRetries):
            found = middleware
        elif type(middleware) is Retries:
            swapped = FairRetries.__new__(FairRetries)
            swapped.__dict__.update(middleware.__dict__)
            broker.middleware[i] = found = swapped
        elif isinstance(middleware, Retries):
            raise ConfigError(
                f"the broker's retry middleware {type(middleware).__name__} would retry fair "
                "messages that fairq retries already; make it skip messages whose options "
                f"hold {TICKET_KEY!r} (or derive it from fairq.integrations.dramatiq.FairRetries)"
            )
    return found
