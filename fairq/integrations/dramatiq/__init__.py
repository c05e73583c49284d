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

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, cast, overload

try:
    import dramatiq
    from dramatiq.broker import Broker
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "fairq.integrations.dramatiq needs Dramatiq: pip install 'fairq[dramatiq]'"
    ) from exc

from fairq.app import App
from fairq.app.declare import JobDefinition, TenantRule
from fairq.errors import ConfigError
from fairq.integrations.dramatiq.options import (
    COST_OPTION,
    DEFAULT_LEASE,
    LEASE_OPTION,
    SLOTS_OPTION,
    TENANT_OPTION,
    THROTTLE_OPTION,
)
from fairq.integrations.dramatiq.publish import DramatiqPublisher
from fairq.integrations.dramatiq.router import RoutedActor
from fairq.integrations.dramatiq.runs import FairMiddleware, FairRetries, fair_of, take_over_retries
from fairq.integrations.dramatiq.slots import SlotGuard
from fairq.integrations.dramatiq.tasks import FairActor
from fairq.policy.throttle import Throttle
from fairq.relay import RelayedRuns

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
        self.retries = take_over_retries(broker)
        self.middleware = FairMiddleware(self)
        broker.add_middleware(self.middleware)

    @staticmethod
    def of(broker: Broker) -> FairDramatiq:
        """The FairDramatiq made for ``broker``."""
        return fair_of(broker)

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
        (``lease``: how long a killed worker's slot stays taken). See router.py, slots.py."""

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
