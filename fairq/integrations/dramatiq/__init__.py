"""Fair scheduling for Dramatiq actors (extra ``fairq[dramatiq]``).

A fair actor's ordinary ``actor.send(...)`` stores the job in fairq, under its tenant; ``fairq
relay module:fair`` releases the jobs into the Dramatiq broker in fairq's fair order (weights,
caps, rates, throttle rules), at most ``--in-flight`` per queue at a time; the ``dramatiq``
worker runs them as usual, and ``FairMiddleware`` claims each job's lease before it runs and
acks or fails it in fairq after. See docs/integrations/dramatiq.md::

    broker = RedisBroker(url="redis://localhost:6379/0")
    dramatiq.set_broker(broker)
    fair = FairDramatiq(broker, url="redis://localhost:6379/1")

    @fair.actor(tenant="account_id", queue_name="imports", max_retries=3)
    def import_csv(account_id: str, path: str) -> None: ...

    import_csv.send("acme", "s3://bucket/file.csv")  # stored in fairq for tenant "acme"

Retries of fair messages are fairq's (with the actor's ``max_retries`` and ``min_backoff``),
never Dramatiq's as well: ``FairDramatiq`` swaps the broker's ``Retries`` middleware for
``FairRetries``, which leaves relayed messages alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, cast, overload

try:
    import dramatiq
    from dramatiq.broker import Broker, MessageProxy
    from dramatiq.middleware import Middleware, SkipMessage
    from dramatiq.middleware.retries import Retries
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "fairq.integrations.dramatiq needs Dramatiq: pip install 'fairq[dramatiq]'"
    ) from exc

from fairq.app import App
from fairq.app.declare import JobDefinition, TenantRule
from fairq.errors import ConfigError, MissingTenant
from fairq.integrations.dramatiq.peer import SLOTS_OPTION, RoutedActor, SlotGuard
from fairq.integrations.dramatiq.publish import DramatiqPublisher
from fairq.policy.throttle import Throttle
from fairq.relay import TICKET_KEY, BadTicket, RelayedRun, RelayedRuns
from fairq.worker.joblog import describe

__all__ = [
    "DramatiqPublisher",
    "FairActor",
    "FairDramatiq",
    "FairMiddleware",
    "FairRetries",
    "RoutedActor",
]

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("fairq.integrations.dramatiq")

#: Actor options FairMiddleware adds (``@dramatiq.actor(actor_class=FairActor, fair_tenant=…)``);
#: ``fair_tenant`` may also be given per message: ``send_with_options(…, fair_tenant="acme")``.
TENANT_OPTION = "fair_tenant"
LEASE_OPTION = "fair_lease"
COST_OPTION = "fair_cost"
THROTTLE_OPTION = "fair_throttle"
#: Seconds a fair job's lease lasts without a heartbeat: how long a killed Dramatiq worker's
#: job waits before the relay releases it again.
DEFAULT_LEASE = 60.0


class FairDramatiq:
    """fairq in front of one Dramatiq broker: what ``fairq relay`` runs from (a RelaySource).

    ``url``: the fairq store (default ``$FAIRQ_URL``), the same in producers, the relay and the
    workers; or ``app``: a fairq App of your own. Adds ``FairMiddleware`` to the broker and
    swaps its ``Retries`` for ``FairRetries``. Make it before declaring fair actors.
    """

    def __init__(self, broker: Broker, url: str | None = None, *, app: App | None = None) -> None:
        if not isinstance(broker, Broker):
            raise ConfigError(f"FairDramatiq needs a Dramatiq broker, got {broker!r}")
        if app is not None and url is not None:
            raise ConfigError("give FairDramatiq either url= or app=, not both")
        if any(isinstance(m, FairMiddleware) for m in broker.middleware):
            raise ConfigError(f"broker {broker!r} already has a FairDramatiq")
        self.broker = broker
        self.app = app if app is not None else App(url)
        self.runs = RelayedRuns(self.app)
        self.slots = SlotGuard(self)
        self.retries = _take_over_retries(broker)
        self.middleware = FairMiddleware(self)
        broker.add_middleware(self.middleware)

    @staticmethod
    def of(broker: Broker) -> FairDramatiq:
        """The FairDramatiq made for ``broker``."""
        for middleware in broker.middleware:
            if isinstance(middleware, FairMiddleware):
                return middleware.fair
        raise ConfigError(
            f"broker {broker!r} has no FairDramatiq: make fair = FairDramatiq(broker, url=…) "
            "before declaring fair actors (with @fair.actor or actor_class=FairActor)"
        )

    @overload
    def actor(
        self,
        fn: Callable[P, R],
        /,
        *,
        tenant: TenantRule = None,
        queue_name: str = "default",
        actor_name: str | None = None,
        priority: int = 0,
        lease: float | timedelta = DEFAULT_LEASE,
        cost: float | timedelta = 1.0,
        throttle: Sequence[Throttle] = (),
        **options: Any,
    ) -> FairActor[P, R]: ...

    @overload
    def actor(
        self,
        fn: None = None,
        /,
        *,
        tenant: TenantRule = None,
        queue_name: str = "default",
        actor_name: str | None = None,
        priority: int = 0,
        lease: float | timedelta = DEFAULT_LEASE,
        cost: float | timedelta = 1.0,
        throttle: Sequence[Throttle] = (),
        **options: Any,
    ) -> Callable[[Callable[P, R]], FairActor[P, R]]: ...

    def actor(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        tenant: TenantRule = None,
        queue_name: str = "default",
        actor_name: str | None = None,
        priority: int = 0,
        lease: float | timedelta = DEFAULT_LEASE,
        cost: float | timedelta = 1.0,
        throttle: Sequence[Throttle] = (),
        **options: Any,
    ) -> FairActor[P, R] | Callable[[Callable[P, R]], FairActor[P, R]]:
        """``@dramatiq.actor`` for a fair actor on this broker.

        ``tenant``: the argument holding the tenant id, or a function of the arguments that
        returns it (else each send passes ``fair_tenant=``). ``lease``: seconds a job stays
        claimed without a heartbeat (a killed worker's job runs again after it). ``cost``:
        estimated seconds per run. ``throttle``: ``fairq.Throttle`` rules (fairq queues the
        relay also releases). Other options are Dramatiq's (``max_retries``, ``min_backoff``,
        ``time_limit``, ``on_failure``, …).
        """

        def declare(f: Callable[P, R]) -> FairActor[P, R]:
            made = dramatiq.actor(
                actor_class=FairActor,
                actor_name=actor_name,
                queue_name=queue_name,
                priority=priority,
                broker=self.broker,
                **{
                    TENANT_OPTION: tenant,
                    LEASE_OPTION: lease,
                    COST_OPTION: cost,
                    THROTTLE_OPTION: tuple(throttle),
                },
                **options,
            )(f)
            return cast("FairActor[P, R]", made)

        return declare(fn) if fn is not None else declare

    def routed_actor(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        tenant: TenantRule = None,
        throttle: Sequence[Throttle] = (),
        slots: bool = False,
        queue_name: str = "default",
        actor_name: str | None = None,
        priority: int = 0,
        lease: float | timedelta = DEFAULT_LEASE,
        **options: Any,
    ) -> Any:
        """``@dramatiq.actor`` for a plain actor (no relay) that fairq routes at send by its
        ``throttle`` rules and, with ``slots=True``, runs only within its tenant's cap
        (``lease``: how long a killed worker's slot stays taken). See peer.py."""

        def declare(f: Callable[P, R]) -> RoutedActor[P, R]:
            made = dramatiq.actor(
                actor_class=RoutedActor,
                actor_name=actor_name,
                queue_name=queue_name,
                priority=priority,
                broker=self.broker,
                **{
                    TENANT_OPTION: tenant,
                    THROTTLE_OPTION: tuple(throttle),
                    SLOTS_OPTION: slots,
                    LEASE_OPTION: lease,
                },
                **options,
            )(f)
            return cast("RoutedActor[P, R]", made)

        return declare(fn) if fn is not None else declare

    # -- RelaySource -------------------------------------------------------------------------

    def relay_queues(self) -> list[str]:
        """The fairq queues of this broker's fair actors (their own and their throttle rules')."""
        queues: dict[str, None] = {}
        for found in self.broker.actors.values():
            if isinstance(found, FairActor):
                queues[found.queue_name] = None
                queues.update(dict.fromkeys(rule.queue for rule in found.job.throttle))
        return list(queues)

    def publisher(self) -> DramatiqPublisher:
        return DramatiqPublisher(self.broker)

    # -- declaring ---------------------------------------------------------------------------

    def declare(self, actor: FairActor[P, R]) -> JobDefinition[P, R]:
        """Declare ``actor`` as a fairq job of the same name and queue. Retries follow the
        actor's (else the broker's ``Retries``) ``max_retries`` and ``min_backoff``."""
        options = actor.options
        default_retries = self.retries.max_retries if self.retries is not None else 0
        max_retries = options.get("max_retries", default_retries)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(
                f"fair actor {actor.actor_name!r}: max_retries must be a whole number >= 0 (fairq "
                f"gives up after max_retries + 1 attempts), got {max_retries!r}"
            )
        default_backoff = self.retries.min_backoff if self.retries is not None else 1000
        min_backoff = options.get("min_backoff", default_backoff)
        if isinstance(min_backoff, bool) or not isinstance(min_backoff, (int, float)):
            raise ConfigError(
                f"fair actor {actor.actor_name!r}: min_backoff must be milliseconds, got "
                f"{min_backoff!r}"
            )
        throttle = options.get(THROTTLE_OPTION) or ()
        return self.app.job(
            actor.fn,
            name=actor.actor_name,
            queue=actor.queue_name,
            tenant=options.get(TENANT_OPTION),
            max_attempts=max_retries + 1,
            lease=options.get(LEASE_OPTION, DEFAULT_LEASE),
            cost=options.get(COST_OPTION, 1.0),
            retry_base=min_backoff / 1000,
            throttle=throttle,
        )


class FairActor(dramatiq.Actor[P, R]):
    """A Dramatiq actor whose ``send``/``send_with_options`` store the job in fairq.

    Use ``@fair.actor(...)``, or ``@dramatiq.actor(actor_class=FairActor, fair_tenant=…)``
    on a broker that has a ``FairDramatiq``. ``delay=`` (milliseconds or a timedelta) keeps
    the job in fairq until it is due; ``fair_tenant=`` names its tenant. Calling the actor
    runs it here, as for any actor; ``message()`` builds a plain message (see the docs on
    pipelines).
    """

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
        if not isinstance(broker.actors.get(message.actor_name), FairActor):
            return
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


def _take_over_retries(broker: Broker) -> Retries | None:
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
