"""A queue's defaults and a tenant's own settings, as the store keeps them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Protocol

from fairq.errors import ConfigError
from fairq.policy.bounds import (
    check_max_in_flight,
    check_max_running,
    check_seconds,
    check_tenant,
    check_weight,
)
from fairq.policy.queues import check_queue_name
from fairq.policy.rate import Rate


class Keep(Enum):
    """Marks a setting that an update leaves as it is."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True, kw_only=True)
class QueueSettings:
    """Defaults that every tenant of a queue gets unless it has its own setting, and the
    queue's own cap.

    ``max_in_flight`` caps the queue's leased jobs, all tenants and all workers together (None:
    no cap): while that many are leased, dequeue hands out nothing from the queue (it tries the
    next queue asked), and a batch dequeue at most the room left. Which tenant gets a job is
    decided exactly as without it. A lease that ends (ack, fail, release, expiry) frees room,
    and waiters are woken when the queue goes from full to not full. Lowering it below the
    jobs already leased ends none of them: nothing is handed out until they drop below it.
    """

    queue: str
    weight: float = 1.0
    max_running: int | None = None  # None: no cap
    rate: Rate | None = None  # None: no rate limit
    half_life: float | None = None  # None: idle tenants carry no history (the default rule)
    max_debt: float = 60.0  # with a half-life: the most recent service a tenant carries back
    max_in_flight: int | None = None  # None: no cap on the queue's leased jobs

    def __post_init__(self) -> None:
        """Refuse what some store cannot hold, before any store sees it (fairq.policy.bounds)."""
        check_queue_name(self.queue)
        check_weight(self.weight)
        check_max_running(self.max_running)
        check_max_in_flight(self.max_in_flight)
        _check_rate(self.rate)
        if self.half_life is not None:
            check_seconds("half_life", self.half_life)
        check_seconds("max_debt", self.max_debt)


def _check_rate(rate: object) -> None:
    if rate is not None and not isinstance(rate, Rate):
        raise ConfigError(f"rate must be a fairq.Rate or None, got {rate!r}")


@dataclass(frozen=True, kw_only=True)
class GetQueueParams:
    queue: str


#: A queue's settings by name: the fields of ``QueueSettings`` but ``queue``.
QUEUE_SETTINGS = ("weight", "max_running", "rate", "half_life", "max_debt", "max_in_flight")


@dataclass(frozen=True, kw_only=True)
class SetQueueParams:
    """Store a queue's settings: those of ``settings``, except the ones named in ``keep``, which
    stay as stored (their values in ``settings`` are not read). The store reads and writes in
    one transaction, so two calls changing different settings never undo each other."""

    settings: QueueSettings
    now: float
    keep: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.keep) - set(QUEUE_SETTINGS))
        if unknown:
            raise ConfigError(
                f"keep names {', '.join(unknown)}, which a queue does not have; "
                f"name some of {', '.join(QUEUE_SETTINGS)}"
            )

    @classmethod
    def changing(cls, settings: QueueSettings, now: float, names: Iterable[str]) -> SetQueueParams:
        """Store only the settings ``names`` of ``settings``; keep every other as stored."""
        return cls(settings=settings, now=now, keep=frozenset(QUEUE_SETTINGS) - set(names))

    def apply_to(self, stored: QueueSettings) -> QueueSettings:
        """The settings to store, given the queue's stored ones (a queue never set has the
        defaults, ``QueueSettings(queue=name)``)."""
        return replace(self.settings, **{name: getattr(stored, name) for name in self.keep})


@dataclass(frozen=True, kw_only=True)
class TenantSettingsParams:
    """Change one tenant's settings in one queue. ``None`` returns to the queue's default."""

    queue: str
    tenant: str
    now: float
    weight: float | Keep | None = KEEP  # 0 pauses the tenant: its jobs wait, nothing is lost
    max_running: int | Keep | None = KEEP
    rate: Rate | Keep | None = KEEP

    def __post_init__(self) -> None:
        """Refuse what some store cannot hold, before any store sees it (fairq.policy.bounds)."""
        check_queue_name(self.queue)
        check_tenant(self.tenant)
        if not isinstance(self.weight, Keep) and self.weight is not None:
            check_weight(self.weight, paused_ok=True)
        if not isinstance(self.max_running, Keep):
            check_max_running(self.max_running)
        if not isinstance(self.rate, Keep):
            _check_rate(self.rate)

    def apply_to(self, tenant: OwnSettings) -> None:
        """Set a stored tenant's own settings to those asked (a KEEP leaves one as it is)."""
        if not isinstance(self.weight, Keep):
            tenant.own_weight = self.weight
        if not isinstance(self.max_running, Keep):
            tenant.own_max_running = self.max_running
        if not isinstance(self.rate, Keep):
            tenant.own_rate = self.rate


class OwnSettings(Protocol):
    """A stored tenant's own settings (None: the queue's default), as the SQL stores keep them."""

    own_weight: float | None
    own_max_running: int | None
    own_rate: Rate | None
