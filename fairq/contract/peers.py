"""The operations the peers' side asks of the Backend contract. ``route``: the throttle
decision of a native enqueue for a job bound for a peer's broker. The slot guard
(``acquire_slot``, ``renew_slots``, ``release_slots``, ``leave_line``; rules in
fairq/policy/slots.py): a peer's worker takes a tenant's slot before it runs a job, so the
tenant's cap holds outside fairq's own workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from fairq.errors import ConfigError
from fairq.policy import slots
from fairq.policy.bounds import check_int, check_seconds, check_tenant
from fairq.policy.queues import check_queue_name
from fairq.policy.throttle import Throttle


@dataclass(frozen=True, kw_only=True)
class AcquireSlotParams:
    """Take one of ``tenant``'s slots in ``queue`` for ``lease`` seconds, if one is free.

    First the (queue, tenant)'s expired slots are dropped; then a slot is taken when fewer than
    the cap are held. The cap is ``limit`` when given, else the tenant's ``max_running`` in the
    queue as the store knows it (``set_tenant``, else ``set_queue``'s default: a change applies
    to the next acquire), else there is none and every acquire is granted. Slots share that
    setting with native jobs, not their count: a slot does not hold back a dequeue, nor the
    reverse. ``holder`` (a worker id) is kept with the slot. Rules: fairq/policy/slots.py.

    Parking (so a freed slot starts a waiting job at once, not after a back-off): a refused
    acquire given ``park`` (what the peer needs to publish the job again) keeps it in the
    (queue, tenant)'s line and answers its place (``SlotResult.waiter``); every later copy of
    that job passes ``waiter``. A copy whose place is gone (another copy took a slot) gets
    ``gone`` and must not run; a copy that takes a slot leaves the line; a refused one keeps
    its place and becomes wakeable again. ``release_slots`` hands back the oldest wakeable
    parked job of each slot it frees (``ReleaseSlotsResult.wake``).
    """

    queue: str
    tenant: str
    holder: str
    lease: float
    now: float
    limit: int | None = None
    waiter: str | None = None
    park: str | None = None

    def __post_init__(self) -> None:
        """Refuse what some store cannot hold, naming the argument (fairq.policy.bounds)."""
        check_queue_name(self.queue)
        object.__setattr__(self, "tenant", check_tenant(self.tenant))  # an int: its text
        if not isinstance(self.holder, str) or not self.holder or "\x00" in self.holder:
            raise ConfigError(
                f"holder must be a non-empty str without NUL (a worker id), got {self.holder!r}"
            )
        object.__setattr__(self, "lease", check_seconds("lease", self.lease))
        if self.limit is not None:
            check_int("limit (or None: the tenant's max_running)", self.limit)
        if self.waiter is not None and not slots.is_waiter(self.waiter):
            raise ConfigError(
                f"waiter must be a place a refused acquire answered, got {self.waiter!r}"
            )
        if self.park is not None and (not isinstance(self.park, str) or not self.park):
            raise ConfigError(
                f"park must be a non-empty str (the job to publish), got {self.park!r}"
            )


@dataclass(frozen=True, kw_only=True)
class SlotResult:
    """A slot taken (``token``, held until ``deadline`` unless renewed), or refused: then
    ``free_at`` is the earliest deadline among the slots held, a hint for when to try again."""

    token: str | None = None
    deadline: float | None = None
    free_at: float | None = None
    waiter: str | None = None  # refused and parked: the job's place in line (copies carry it)
    gone: bool = False  # the ``waiter`` passed is no longer parked: this copy must not run

    @property
    def granted(self) -> bool:
        return self.token is not None


@dataclass(frozen=True, kw_only=True)
class RenewSlotsParams:
    tokens: Sequence[str]
    now: float


@dataclass(frozen=True, kw_only=True)
class RenewSlotsResult:
    deadlines: Mapping[str, float]  # token -> new deadline (now + its lease), for slots held
    lost: Sequence[str] = ()  # expired, released or unknown; nothing was changed for them


@dataclass(frozen=True, kw_only=True)
class ReleaseSlotsParams:
    tokens: Sequence[str]
    now: float


@dataclass(frozen=True, kw_only=True)
class ReleaseSlotsResult:
    released: Sequence[str] = ()  # tokens whose slot was held and is free now, in order
    lost: Sequence[str] = ()  # expired, already released or unknown: nothing to give back
    wake: Sequence[Woken] = ()  # parked jobs to publish again now, oldest first


@dataclass(frozen=True, kw_only=True)
class LeaveLineParams:
    """Take the job parked at ``waiter`` out of the (queue, tenant)'s line: its peer could not
    send its timed copy and gives the job back to its broker as it was (a requeue carries no
    place), so no copy that carries the place may run after it. ``leave_line`` answers True
    when the place was still in line (every copy carrying it is now ``gone``: the requeued job
    is the only one left), False when it was gone already (a copy took a slot and runs the
    job: the requeued one must be dropped)."""

    queue: str
    tenant: str
    waiter: str

    def __post_init__(self) -> None:
        check_queue_name(self.queue)
        object.__setattr__(self, "tenant", check_tenant(self.tenant))
        if not slots.is_waiter(self.waiter):
            raise ConfigError(
                f"waiter must be a place a refused acquire answered, got {self.waiter!r}"
            )


class Woken(NamedTuple):
    """A parked job a release woke: its place in line (its copies carry it) and its park text."""

    place: str
    park: str


@dataclass(frozen=True, kw_only=True)
class RouteParams:
    """Count one enqueue of job ``name`` for ``tenant`` and choose its queue, storing no job:
    the throttle decision of a native enqueue, for a job that goes to a peer's broker.

    ``queue`` is the job's declared (home) queue; ``rules`` its throttle rules, least to most
    restrictive (no rules: ``queue``, nothing counted). The window is the very one native
    enqueues of the same job name and tenant record in (``throttle_windows`` shows it), so
    routed and native enqueues count together. Which enqueues are counted is the caller's
    rule, as ``App.enqueue``'s: a job given an explicit queue, or a retry, is not routed.
    """

    name: str
    tenant: str
    queue: str
    rules: Sequence[Throttle]
    now: float

    def __post_init__(self) -> None:
        """Refuse what no store can count, before any store sees it."""
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"name must be a job name (a non-empty str), got {self.name!r}")
        object.__setattr__(self, "tenant", check_tenant(self.tenant))  # an int: its text
        check_queue_name(self.queue)
        if isinstance(self.rules, (str, bytes, Throttle)) or not isinstance(self.rules, Sequence):
            raise ConfigError(f"rules must be a list of fairq.Throttle, got {self.rules!r}")
        for rule in self.rules:
            if not isinstance(rule, Throttle):
                raise ConfigError(f"rules must be fairq.Throttle objects, got {rule!r}")
        object.__setattr__(self, "rules", tuple(self.rules))


@dataclass(frozen=True, kw_only=True)
class RouteResult:
    queue: str  # the home queue, or the last matching rule's
