"""The Backend contract: what every store (and the reference model) implements.

One frozen, keyword-only parameter object per operation and a result type, so adding a field
never breaks a caller and every backend reads alike. Time is always a parameter (``now``), which
is what lets the conformance suite drive every store on one virtual clock; a store opened with
its own clock (the default, fairq.backends.clock) performs each event at the later of ``now``
and that clock, so a call that waited (for a lock, a reconnect) never acts in the past. The rules
behind each operation are in docs/internals/scheduler.md; ``fairq.model`` is their executable
form.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol, runtime_checkable

from fairq.cancel import CancelOutcome as CancelOutcome  # re-exported with the other params
from fairq.cancel import CancelParams as CancelParams
from fairq.cancel import CancelResult as CancelResult
from fairq.errors import ConfigError
from fairq.figures import FiguresParams as FiguresParams  # re-exported with the other params
from fairq.figures import TenantFigures as TenantFigures
from fairq.job import JobInfo, JobState, Lease, NewJob, StoredJob
from fairq.peerparams import AcquireSlotParams as AcquireSlotParams  # re-exported as well
from fairq.peerparams import ReleaseSlotsParams as ReleaseSlotsParams
from fairq.peerparams import ReleaseSlotsResult as ReleaseSlotsResult
from fairq.peerparams import RenewSlotsParams as RenewSlotsParams
from fairq.peerparams import RenewSlotsResult as RenewSlotsResult
from fairq.peerparams import RouteParams as RouteParams
from fairq.peerparams import RouteResult as RouteResult
from fairq.peerparams import SlotResult as SlotResult
from fairq.peerparams import Woken as Woken
from fairq.policy.bounds import (
    check_max_in_flight,
    check_max_running,
    check_seconds,
    check_tenant,
    check_weight,
)
from fairq.policy.cost import JobCost as JobCost  # re-exported with the other results
from fairq.policy.queues import check_queue_name
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle
from fairq.recorded import HistoryPage as HistoryPage  # re-exported with the other params
from fairq.recorded import HistoryParams as HistoryParams
from fairq.recorded import RecordedJob as RecordedJob
from fairq.results import JobResult
from fairq.signatures import JobSignature


class Keep(Enum):
    """Marks a setting that an update leaves as it is."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True, kw_only=True)
class EnqueueParams:
    jobs: Sequence[NewJob]
    now: float


@dataclass(frozen=True, kw_only=True)
class EnqueueResult:
    """The queue each job went to, in order: its own or a throttle rule's (or, for a job
    whose unique key was held, the queue of the job holding it).

    ``existing``: the jobs of the batch that found their unique key held (fairq.job.Unique),
    by position, each with the id of the job holding the key: nothing was stored for them.
    """

    queues: Sequence[str]
    existing: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class DequeueParams:
    """Take up to ``limit`` jobs; each is what one single dequeue would have given, in order.

    ``queues`` are tried in the given order for every job (the worker decides the order).

    With ``wait`` > 0 the store first waits, up to that many seconds, until new work may have
    arrived in ``queues`` (as ``Backend.wait``), then dequeues at ``now`` moved on by the time
    waited (Redis: the server's clock, when later). An idle worker asks this way: a store that
    can run the dequeue the moment its wait ends saves a round trip on the way to a new job.
    """

    queues: Sequence[str]
    worker_id: str
    now: float
    limit: int = 1
    wait: float = 0.0
    #: The relay's dequeue: hand the jobs out *unclaimed*, each leased for ``hold`` seconds
    #: (not its own lease) until a peer's worker claims it (``HeartbeatParams.claim``), which
    #: starts its run. Until then it is charged its estimate and nothing more (its wait in the
    #: broker is not service), the relay keeps the hold alive (``HeartbeatParams.hold``), and
    #: if the hold lapses (the relay died) the job is ready again, the attempt not counted.
    #: None: the job's run starts now, under its own lease (a native worker).
    hold: float | None = None

    def __post_init__(self) -> None:
        if self.hold is not None:
            check_seconds("hold", self.hold)


@dataclass(frozen=True, kw_only=True)
class ExpiredLease:
    """A run whose lease ran out before its worker reported: the worker died, hung, or lost
    the store for longer than the lease. The job is ready again, or dead when ``dead``."""

    job_id: str
    name: str
    queue: str
    tenant: str
    attempt: int  # the attempt that expired (1 for the first run)
    deadline: float
    dead: bool  # that was its last attempt
    cancelled: bool = False  # it had a cancel request: it ends cancelled, never retried
    #: False: a relayed job no worker claimed before its hold lapsed (the relay died): it is
    #: ready again with the attempt not counted (``attempt`` is the one it would have been).
    claimed: bool = True

    @classmethod
    def of(cls, job: StoredJob, deadline: float) -> ExpiredLease:
        """The report of a job just failed by its lease's expiry (``deadline``: the lease's)."""
        return cls(
            job_id=job.id,
            name=job.name,
            queue=job.queue,
            tenant=job.tenant,
            attempt=job.attempts,
            deadline=deadline,
            dead=job.state is JobState.DEAD,
            cancelled=job.state is JobState.CANCELLED,
        )

    @classmethod
    def unclaimed(cls, job: StoredJob, deadline: float) -> ExpiredLease:
        """The report of a relayed job just made ready again because no worker claimed it
        before its hold lapsed (its attempt already given back)."""
        return cls(
            job_id=job.id,
            name=job.name,
            queue=job.queue,
            tenant=job.tenant,
            attempt=job.attempts + 1,
            deadline=deadline,
            dead=False,
            cancelled=job.state is JobState.CANCELLED,
            claimed=False,
        )


@dataclass(frozen=True, kw_only=True)
class DequeueResult:
    leases: Sequence[Lease] = ()
    expired: Sequence[ExpiredLease] = ()  # the leases its maintenance expired, in that order


@dataclass(frozen=True, kw_only=True)
class AckManyParams:
    """Ack several leases in one atomic step, in the order given (a worker's finished jobs).

    ``results``: the return values to keep, by token (only jobs declared with ``result_ttl``
    have one; fairq.results). Each is kept with its succeeded job until ``now + keep``, when
    maintenance deletes the job with it, whatever its ``MaintainParams.retention``. A token
    that is lost keeps nothing."""

    tokens: Sequence[str]
    now: float
    results: Mapping[str, JobResult] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AckManyResult:
    acked: Sequence[str] = ()  # tokens acked, in the order given
    lost: Sequence[str] = ()  # tokens that are expired or unknown; nothing was changed for them


@dataclass(frozen=True, kw_only=True)
class AckAndDequeueParams:
    """A busy worker's one round trip: its finished jobs, then the jobs that replace them."""

    acks: AckManyParams
    dequeue: DequeueParams  # must not wait: a store cannot wait between the two


@dataclass(frozen=True, kw_only=True)
class AckAndDequeueResult:
    acks: AckManyResult
    dequeue: DequeueResult


@dataclass(frozen=True, kw_only=True)
class FailParams:
    """End an attempt in failure. ``retry_at=None`` (or no attempts left) makes the job dead;
    a job with a cancel request (fairq.cancel) ends cancelled instead, never retried."""

    token: str
    now: float
    error: str
    retry_at: float | None


@dataclass(frozen=True, kw_only=True)
class ReleaseParams:
    """Hand a job back unfinished, the attempt not counted: ready again at once (a worker's
    shutdown), or scheduled until ``run_at`` (a worker that cannot run it: it waits for one
    that can). ``note``, when given, is kept as the job's last error, to say why. A job with
    a cancel request (fairq.cancel) ends cancelled instead."""

    token: str
    now: float
    run_at: float | None = None
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class HeartbeatParams:
    """Extend held leases to ``now`` + each job's lease, charging each run its time so far.

    ``claim``: a peer's worker takes relayed jobs (``DequeueParams.hold``): an unclaimed lease's
    run starts now (``started_at = now``, its own lease from now, still charged its estimate);
    one already claimed is left as it is and reported in ``claimed``: its message is a copy the
    broker delivered again while the job runs elsewhere, which must not run too. (A native
    job's lease is claimed from its dispatch: a claim of it is refused the same way.)

    ``hold``: the relay keeps the jobs it published and no worker claimed yet: each unclaimed
    lease's deadline becomes ``now + hold`` (a shorter hold gives it back sooner), charged
    nothing; a claimed one is left as it is and reported in ``claimed``.
    """

    tokens: Sequence[str]
    now: float
    claim: bool = False
    hold: float | None = None

    def __post_init__(self) -> None:
        if self.hold is not None:
            check_seconds("hold", self.hold)
            if self.claim:
                raise ConfigError("a heartbeat either claims leases or holds them, not both")


@dataclass(frozen=True, kw_only=True)
class HeartbeatResult:
    deadlines: Mapping[str, float]  # token -> new deadline, for the leases still held
    lost: Sequence[str] = ()  # tokens that are expired or unknown; nothing was changed for them
    cancelled: Sequence[str] = ()  # held tokens whose job has a cancel request (fairq.cancel)
    #: With ``HeartbeatParams.hold`` or ``claim``: held tokens already claimed (left as they
    #: were).
    claimed: Sequence[str] = ()


@dataclass(frozen=True, kw_only=True)
class CheckpointParams:
    """Store a running job's progress (``fairq.job.Progress.encode``'s JSON text, which the
    store keeps as it is) and extend its lease as ``heartbeat`` does, charging the run so far.

    The progress stays with the job through releases, retries, expiries and requeues, so its
    next run resumes from it; ``get_jobs`` shows it (``JobInfo.progress``)."""

    token: str
    progress: str
    now: float


@dataclass(frozen=True, kw_only=True)
class CheckpointResult:
    deadline: float  # the lease's new deadline


@dataclass(frozen=True, kw_only=True)
class MaintainParams:
    """Promote due scheduled jobs, expire overdue leases, prune old finished jobs.

    With a ``retention``, every queue's succeeded and cancelled jobs that ended more than that
    long ago are deleted, but those that keep a result (``AckManyParams.results``): each of
    these is deleted once its result expires, whether that is sooner or later. Without one,
    nothing is deleted. Unique keys whose window ended are deleted on every call, whatever
    ``queues`` and ``retention``."""

    now: float
    queues: Sequence[str] | None = None  # None: every queue
    retention: float | None = None  # delete succeeded/cancelled jobs ended this long ago


@dataclass(frozen=True, kw_only=True)
class MaintainResult:
    promoted: int = 0
    expired: Sequence[ExpiredLease] = ()  # in the order expired: (deadline, seq) per queue
    pruned: int = 0  # jobs deleted: by the retention, or with their expired result
    next_due: float | None = None  # earliest scheduled run-at or lease deadline still pending


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


@dataclass(frozen=True, kw_only=True)
class SetQueueParams:
    settings: QueueSettings
    now: float


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


@dataclass(frozen=True, kw_only=True)
class StatsParams:
    queue: str | None = None
    tenant: str | None = None
    now: float | None = None  # decay ``usage`` to this time; None: as last recorded


@dataclass(frozen=True, kw_only=True)
class TenantStats:
    """One (queue, tenant): effective settings, current counts, lifetime counters."""

    queue: str
    tenant: str
    weight: float
    max_running: int | None
    ready: int
    scheduled: int
    running: int
    succeeded: int  # lifetime
    failed: int  # lifetime count of failed attempts (errors and expired leases)
    dead: int  # current
    oldest_ready_at: float | None  # when the longest-waiting ready job became ready
    rate: Rate | None = None  # effective rate limit
    limited_until: float | None = None  # rate-limited: eligible again at this time
    usage: float = 0.0  # recent service (virtual seconds), decayed to StatsParams.now
    cancelled: int = 0  # lifetime count of jobs cancelled (fairq.cancel)


@dataclass(frozen=True, kw_only=True)
class JobCostsParams:
    queue: str | None = None  # None: every queue


@dataclass(frozen=True, kw_only=True)
class GetJobsParams:
    ids: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class ListDeadParams:
    queue: str | None = None
    tenant: str | None = None
    limit: int = 100


@dataclass(frozen=True, kw_only=True)
class RequeueParams:
    ids: Sequence[str]
    now: float


@dataclass(frozen=True, kw_only=True)
class JobType:
    """A job declaration as published to the store, so producers can enqueue by name alone."""

    name: str
    queue: str
    tenant_arg: str | None  # the argument holding the tenant; None when a callable finds it
    params: Sequence[str] = field(default_factory=tuple)  # positional parameter names, in order
    signature: JobSignature | None = None  # the rest of its shape; None: from an older fairq
    max_attempts: int
    lease_timeout: float
    cost: float
    throttle: Sequence[Throttle] = ()
    learn_cost: bool = True  # False: its jobs are always charged ``cost`` (fairq.policy.cost)


@dataclass(frozen=True, kw_only=True)
class PublishJobTypesParams:
    types: Sequence[JobType]


@dataclass(frozen=True, kw_only=True)
class ThrottleWindowsParams:
    keys: Sequence[tuple[str, str]]  # (job name, tenant)
    now: float


@dataclass(frozen=True, kw_only=True)
class WaitParams:
    """Block up to ``timeout`` seconds or until new work may have arrived in ``queues``."""

    queues: Sequence[str]
    timeout: float


@runtime_checkable
class Backend(Protocol):
    """A store of fair per-tenant queues. Every method is atomic."""

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        """Store all jobs or none (a used id raises DuplicateJob). ``run_at <= now``: ready.

        A job with a unique key (``NewJob.unique``) whose key is held (fairq/policy/unique.py:
        by a stored job, or an earlier one of the batch) is not stored, nor its id checked:
        ``EnqueueResult.existing`` names the job holding it. The others take their keys. The
        check and the take are one atomic step with the enqueue: of concurrent enqueues with
        one key, exactly one stores its job."""

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        """Maintain the queues (as ``maintain``), then hand out up to ``limit`` jobs fairly,
        none from a queue at its ``QueueSettings.max_in_flight``."""

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        """Mark jobs succeeded: each token in order, atomically, exactly as one by one.

        A token that is expired or unknown (or repeated: its second ack finds it finished) is
        reported in ``lost`` and changes nothing; nothing is raised for it. One transaction
        (one script) for the whole batch, so a worker pays one round trip per batch of jobs.
        """

    def ack_and_dequeue(self, params: AckAndDequeueParams) -> AckAndDequeueResult:
        """``ack_many`` then ``dequeue``, as one atomic step (one round trip): a busy worker
        stores its finished jobs and fills their slots at once. Its dequeue does not wait
        (``wait`` > 0 raises ValueError)."""

    def fail(self, params: FailParams) -> JobInfo:
        """End a failed attempt: scheduled for retry, dead, or cancelled (``FailParams``).
        Raises LeaseExpired / LeaseNotFound and changes nothing when the lease is not held."""

    def release(self, params: ReleaseParams) -> None:
        """Hand a job back unfinished. Raises like ``fail``."""

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        """Extend each held lease to ``now + lease_timeout``; say which have a cancel request."""

    def checkpoint(self, params: CheckpointParams) -> CheckpointResult:
        """Store a held job's progress and extend its lease (``CheckpointParams``). Raises
        LeaseExpired / LeaseNotFound and changes nothing when the lease is not held."""

    def maintain(self, params: MaintainParams) -> MaintainResult: ...

    def set_queue(self, params: SetQueueParams) -> None:
        """Store a queue's defaults; every tenant without its own setting follows them."""

    def get_queue(self, params: GetQueueParams) -> QueueSettings: ...

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats: ...

    def stats(self, params: StatsParams) -> list[TenantStats]:
        """One row per (queue, tenant) the store has seen, sorted by queue then tenant."""

    def figures(self, params: FiguresParams) -> list[TenantFigures]:
        """Each (queue, tenant)'s recent wait and run-time histograms and ends by outcome
        (fairq/figures.py), sorted by queue then tenant: those with figures in the window."""

    def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        """The jobs that exist among ``ids``, in the order asked."""

    def job_costs(self, params: JobCostsParams) -> list[JobCost]:
        """Each (queue, job name)'s learned run time (fairq.policy.cost), sorted by queue then
        name: those with at least one sample."""

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        """Dead jobs, oldest death first."""

    def history(self, params: HistoryParams) -> HistoryPage:
        """One page of a queue's jobs enqueued in a window, finished or not, read without
        changing or locking live work (fairq/recorded.py): what a replay reads."""

    def requeue(self, params: RequeueParams) -> int:
        """Make dead jobs ready again with fresh attempts; returns how many were dead."""

    def cancel(self, params: CancelParams) -> CancelResult:
        """Cancel scheduled and ready jobs, ask running ones to stop (fairq/cancel.py)."""

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        """The recent enqueue times that throttle rules count, per (job name, tenant) asked."""

    def route(self, params: RouteParams) -> RouteResult:
        """Count an enqueue in its throttle window and choose its queue, storing no job
        (``RouteParams``): atomic per (job name, tenant), in the window native enqueues use."""

    def acquire_slot(self, params: AcquireSlotParams) -> SlotResult:
        """Drop the (queue, tenant)'s expired slots, then take one if fewer than the cap are
        held (``AcquireSlotParams``); atomic per (queue, tenant)."""

    def renew_slots(self, params: RenewSlotsParams) -> RenewSlotsResult:
        """Extend each held slot to ``now`` + its lease; others are reported lost, unchanged."""

    def release_slots(self, params: ReleaseSlotsParams) -> ReleaseSlotsResult:
        """Give slots back; a token not held (expired, released, unknown) is reported lost."""

    def publish_job_types(self, params: PublishJobTypesParams) -> None: ...

    def job_types(self) -> dict[str, JobType]: ...

    def wait(self, params: WaitParams) -> None:
        """Block up to ``timeout`` seconds or until new work may have arrived in ``queues``."""

    def close(self) -> None: ...


def no_wait(params: DequeueParams) -> None:
    """Refuse a waiting dequeue where a store cannot wait (``ack_and_dequeue``)."""
    if params.wait > 0:
        raise ValueError(f"ack_and_dequeue does not wait; got wait={params.wait}")


def waited_first(params: DequeueParams, wait: Callable[[WaitParams], None]) -> DequeueParams:
    """Do a dequeue's wait with ``wait`` (a store's ``Backend.wait``); the params to dequeue
    with then. For the stores that have no way to dequeue the moment a wait ends."""
    if params.wait <= 0:
        return params
    started = time.monotonic()
    wait(WaitParams(queues=params.queues, timeout=params.wait))
    return replace(params, now=params.now + (time.monotonic() - started), wait=0.0)
