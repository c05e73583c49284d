"""A job's way through the store: enqueue, dequeue (one or many, waiting or not), ack, fail,
release, heartbeat, checkpoint, maintenance, and the wait for new work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fairq.errors import ConfigError
from fairq.job import JobState, Lease, NewJob, StoredJob
from fairq.policy.bounds import check_seconds
from fairq.results import JobResult


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
class WaitParams:
    """Block up to ``timeout`` seconds or until new work may have arrived in ``queues``."""

    queues: Sequence[str]
    timeout: float


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
