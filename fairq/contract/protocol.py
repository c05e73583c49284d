"""The Backend protocol: the operations every store (and the reference model) implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from fairq.cancel import CancelParams, CancelResult
from fairq.contract.inspection import (
    GetJobsParams,
    JobCostsParams,
    ListDeadParams,
    RequeueParams,
    StatsParams,
    TenantStats,
    ThrottleWindowsParams,
)
from fairq.contract.jobtypes import JobType, PublishJobTypesParams
from fairq.contract.peers import (
    AcquireSlotParams,
    LeaveLineParams,
    ReleaseSlotsParams,
    ReleaseSlotsResult,
    RenewSlotsParams,
    RenewSlotsResult,
    RouteParams,
    RouteResult,
    SlotResult,
)
from fairq.contract.runs import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    CheckpointParams,
    CheckpointResult,
    DequeueParams,
    DequeueResult,
    EnqueueParams,
    EnqueueResult,
    FailParams,
    HeartbeatParams,
    HeartbeatResult,
    MaintainParams,
    MaintainResult,
    ReleaseParams,
    WaitParams,
)
from fairq.contract.settings import (
    GetQueueParams,
    QueueSettings,
    SetQueueParams,
    TenantSettingsParams,
)
from fairq.figures import FiguresParams, TenantFigures
from fairq.job import JobInfo
from fairq.policy.cost import JobCost
from fairq.recorded import HistoryPage, HistoryParams


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
        """Store a queue's defaults, but those ``params.keep`` names, which stay as stored (read
        in the same transaction); every tenant without its own setting follows them."""

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

    def leave_line(self, params: LeaveLineParams) -> bool:
        """Take a parked job out of its line; False when its place was gone (``LeaveLineParams``):
        atomic with ``acquire_slot`` of the same (queue, tenant)."""

    def publish_job_types(self, params: PublishJobTypesParams) -> None: ...

    def job_types(self) -> dict[str, JobType]: ...

    def wait(self, params: WaitParams) -> None:
        """Block up to ``timeout`` seconds or until new work may have arrived in ``queues``."""

    def close(self) -> None: ...
