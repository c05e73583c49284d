"""The Backend contract: what every store (and the reference model) implements.

One frozen, keyword-only parameter object per operation and a result type, so adding a field
never breaks a caller and every backend reads alike. Time is always a parameter (``now``), which
is what lets the conformance suite drive every store on one virtual clock; a store opened with
its own clock (the default, fairq.backends.clock) performs each event at the later of ``now``
and that clock, so a call that waited (for a lock, a reconnect) never acts in the past. The rules
behind each operation are in docs/internals/scheduler.md; ``fairq.model`` is their executable
form.

A package whose modules are its parts: ``runs`` (a job's way through the store: enqueue to
ack, fail, release, heartbeat, checkpoint, maintenance), ``settings`` (queue and tenant
settings), ``inspection`` (stats, jobs, dead jobs, costs, throttle windows), ``jobtypes`` (the
declarations published to the store), ``peers`` (the peers' route and slot guard), and
``protocol`` (the ``Backend`` protocol over them all). Cancelling (fairq/cancel.py), the
per-tenant figures (fairq/figures.py) and the history a replay reads (fairq/recorded.py) keep
their params beside the steps the stores share for them. Import every name from here.
"""

from __future__ import annotations

from fairq.cancel import CancelOutcome, CancelParams, CancelResult
from fairq.contract.inspection import (
    GetJobsParams,
    JobCostsParams,
    ListDeadParams,
    RequeueParams,
    StatsParams,
    TenantStats,
    ThrottleWindowsParams,
)
from fairq.contract.jobtypes import JobSignature, JobType, PublishJobTypesParams, positional_params
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
    Woken,
)
from fairq.contract.protocol import Backend
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
    ExpiredLease,
    FailParams,
    HeartbeatParams,
    HeartbeatResult,
    MaintainParams,
    MaintainResult,
    ReleaseParams,
    WaitParams,
    no_wait,
    waited_first,
)
from fairq.contract.settings import (
    KEEP,
    QUEUE_SETTINGS,
    GetQueueParams,
    Keep,
    OwnSettings,
    QueueSettings,
    SetQueueParams,
    TenantSettingsParams,
)
from fairq.figures import FiguresParams, TenantFigures
from fairq.policy.cost import JobCost
from fairq.recorded import HistoryPage, HistoryParams, RecordedJob

__all__ = [
    "KEEP",
    "QUEUE_SETTINGS",
    "AckAndDequeueParams",
    "AckAndDequeueResult",
    "AckManyParams",
    "AckManyResult",
    "AcquireSlotParams",
    "Backend",
    "CancelOutcome",
    "CancelParams",
    "CancelResult",
    "CheckpointParams",
    "CheckpointResult",
    "DequeueParams",
    "DequeueResult",
    "EnqueueParams",
    "EnqueueResult",
    "ExpiredLease",
    "FailParams",
    "FiguresParams",
    "GetJobsParams",
    "GetQueueParams",
    "HeartbeatParams",
    "HeartbeatResult",
    "HistoryPage",
    "HistoryParams",
    "JobCost",
    "JobCostsParams",
    "JobSignature",
    "JobType",
    "Keep",
    "LeaveLineParams",
    "ListDeadParams",
    "MaintainParams",
    "MaintainResult",
    "OwnSettings",
    "PublishJobTypesParams",
    "QueueSettings",
    "RecordedJob",
    "ReleaseParams",
    "ReleaseSlotsParams",
    "ReleaseSlotsResult",
    "RenewSlotsParams",
    "RenewSlotsResult",
    "RequeueParams",
    "RouteParams",
    "RouteResult",
    "SetQueueParams",
    "SlotResult",
    "StatsParams",
    "TenantFigures",
    "TenantSettingsParams",
    "TenantStats",
    "ThrottleWindowsParams",
    "WaitParams",
    "Woken",
    "no_wait",
    "positional_params",
    "waited_first",
]
