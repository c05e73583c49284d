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

from fairq.cancel import (
    CancelOutcome as CancelOutcome,
)
from fairq.cancel import (
    CancelParams as CancelParams,
)
from fairq.cancel import (
    CancelResult as CancelResult,
)
from fairq.contract.inspection import (
    GetJobsParams as GetJobsParams,
)
from fairq.contract.inspection import (
    JobCostsParams as JobCostsParams,
)
from fairq.contract.inspection import (
    ListDeadParams as ListDeadParams,
)
from fairq.contract.inspection import (
    RequeueParams as RequeueParams,
)
from fairq.contract.inspection import (
    StatsParams as StatsParams,
)
from fairq.contract.inspection import (
    TenantStats as TenantStats,
)
from fairq.contract.inspection import (
    ThrottleWindowsParams as ThrottleWindowsParams,
)
from fairq.contract.jobtypes import (
    JobSignature as JobSignature,
)
from fairq.contract.jobtypes import (
    JobType as JobType,
)
from fairq.contract.jobtypes import (
    PublishJobTypesParams as PublishJobTypesParams,
)
from fairq.contract.jobtypes import (
    positional_params as positional_params,
)
from fairq.contract.peers import (
    AcquireSlotParams as AcquireSlotParams,
)
from fairq.contract.peers import (
    ReleaseSlotsParams as ReleaseSlotsParams,
)
from fairq.contract.peers import (
    ReleaseSlotsResult as ReleaseSlotsResult,
)
from fairq.contract.peers import (
    RenewSlotsParams as RenewSlotsParams,
)
from fairq.contract.peers import (
    RenewSlotsResult as RenewSlotsResult,
)
from fairq.contract.peers import (
    RouteParams as RouteParams,
)
from fairq.contract.peers import (
    RouteResult as RouteResult,
)
from fairq.contract.peers import (
    SlotResult as SlotResult,
)
from fairq.contract.protocol import (
    Backend as Backend,
)
from fairq.contract.runs import (
    AckAndDequeueParams as AckAndDequeueParams,
)
from fairq.contract.runs import (
    AckAndDequeueResult as AckAndDequeueResult,
)
from fairq.contract.runs import (
    AckManyParams as AckManyParams,
)
from fairq.contract.runs import (
    AckManyResult as AckManyResult,
)
from fairq.contract.runs import (
    CheckpointParams as CheckpointParams,
)
from fairq.contract.runs import (
    CheckpointResult as CheckpointResult,
)
from fairq.contract.runs import (
    DequeueParams as DequeueParams,
)
from fairq.contract.runs import (
    DequeueResult as DequeueResult,
)
from fairq.contract.runs import (
    EnqueueParams as EnqueueParams,
)
from fairq.contract.runs import (
    EnqueueResult as EnqueueResult,
)
from fairq.contract.runs import (
    ExpiredLease as ExpiredLease,
)
from fairq.contract.runs import (
    FailParams as FailParams,
)
from fairq.contract.runs import (
    HeartbeatParams as HeartbeatParams,
)
from fairq.contract.runs import (
    HeartbeatResult as HeartbeatResult,
)
from fairq.contract.runs import (
    MaintainParams as MaintainParams,
)
from fairq.contract.runs import (
    MaintainResult as MaintainResult,
)
from fairq.contract.runs import (
    ReleaseParams as ReleaseParams,
)
from fairq.contract.runs import (
    WaitParams as WaitParams,
)
from fairq.contract.runs import (
    no_wait as no_wait,
)
from fairq.contract.runs import (
    waited_first as waited_first,
)
from fairq.contract.settings import (
    KEEP as KEEP,
)
from fairq.contract.settings import (
    GetQueueParams as GetQueueParams,
)
from fairq.contract.settings import (
    Keep as Keep,
)
from fairq.contract.settings import (
    OwnSettings as OwnSettings,
)
from fairq.contract.settings import (
    QueueSettings as QueueSettings,
)
from fairq.contract.settings import (
    SetQueueParams as SetQueueParams,
)
from fairq.contract.settings import (
    TenantSettingsParams as TenantSettingsParams,
)
from fairq.figures import (
    FiguresParams as FiguresParams,
)
from fairq.figures import (
    TenantFigures as TenantFigures,
)
from fairq.policy.cost import (
    JobCost as JobCost,
)
from fairq.recorded import (
    HistoryPage as HistoryPage,
)
from fairq.recorded import (
    HistoryParams as HistoryParams,
)
from fairq.recorded import (
    RecordedJob as RecordedJob,
)
