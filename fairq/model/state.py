"""The reference model's state: plain records and heaps, no I/O.

Heaps use lazy deletion: an entry records the version (or deadline) it was pushed for, and a
reader drops entries that no longer match. Every operation stays O(log n).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from fairq.job import JobInfo, JobState, Lease
from fairq.policy import history
from fairq.policy.rate import Rate


@dataclass
class Job:
    seq: int
    id: str
    name: str
    queue: str
    tenant: str
    payload: str
    priority: int
    state: JobState
    enqueued_at: float
    run_at: float
    ready_at: float | None
    max_attempts: int
    lease_timeout: float
    cost: float
    learn_cost: bool = True
    attempts: int = 0
    leases: int = 0  # how many leases the job has had; names the current one
    charged: float = 0.0  # seconds of this run already charged to its tenant
    claimed: bool = False  # its run started (a relayed job's when a worker claims it)
    started_at: float | None = None
    deadline: float | None = None
    finished_at: float | None = None
    last_error: str | None = None
    worker: str | None = None
    headers: str | None = None  # as stored (fairq.job.encode_headers)
    progress: str | None = None  # as stored (fairq.job.Progress.encode)
    result: str | None = None  # the return value kept (fairq.results), JSON text
    result_until: float | None = None  # when the job is deleted with its result
    cancel_requested: bool = False  # asked to stop while running (fairq.cancel)

    def info(self) -> JobInfo:
        return JobInfo.of(self)

    def lease(self) -> Lease:
        return Lease.of(self)


@dataclass
class Tenant:
    name: str
    weight: float | None = None  # own setting; None: the queue's default
    max_running: int | None = None
    rate: Rate | None = None
    tat: float | None = None  # GCRA theoretical arrival time, once rate-limited
    limited_until: float | None = None  # set while waiting on its rate limit
    usage: float = 0.0  # recent service, decaying (policy.history)
    usage_at: float = 0.0
    finish: float = 0.0
    start: float | None = None  # set only while eligible
    version: int = 0
    ready_heap: list[tuple[int, int]] = field(default_factory=list)  # (-priority, seq)
    ready: int = 0
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    dead: int = 0
    cancelled: int = 0  # lifetime
    kept: int = 0  # succeeded and cancelled jobs still stored: pruning the last may forget it

    def own_settings(self) -> bool:
        return self.weight is not None or self.max_running is not None or self.rate is not None

    def head_seq(self) -> int | None:
        return self.ready_heap[0][1] if self.ready_heap else None


@dataclass
class Queue:
    name: str
    weight: float = 1.0
    max_running: int | None = None
    rate: Rate | None = None
    half_life: float | None = None
    max_debt: float = 60.0
    max_in_flight: int | None = None  # the queue's cap on leased jobs, all tenants together
    in_flight: int = 0  # its leased (running) jobs
    vclock: float = 0.0
    tenants: dict[str, Tenant] = field(default_factory=dict)
    limited: list[tuple[float, str]] = field(default_factory=list)  # (limited_until, tenant)
    eligible: list[tuple[float, int, str, int]] = field(default_factory=list)
    scheduled: list[tuple[float, int]] = field(default_factory=list)  # (run_at, seq)
    running: list[tuple[float, int, int]] = field(default_factory=list)  # (deadline, seq, attempt)
    versions: int = 0  # eligible-heap versions, per queue: a forgotten tenant's stay stale
    costs: dict[str, tuple[int, float]] = field(default_factory=dict)  # name -> (runs, mean)

    def tenant(self, name: str) -> Tenant:
        found = self.tenants.get(name)
        if found is None:
            found = self.tenants[name] = Tenant(name)
        return found

    def weight_of(self, tenant: Tenant) -> float:
        return tenant.weight if tenant.weight is not None else self.weight

    def cap_of(self, tenant: Tenant) -> int | None:
        return tenant.max_running if tenant.max_running is not None else self.max_running

    def rate_of(self, tenant: Tenant) -> Rate | None:
        return tenant.rate if tenant.rate is not None else self.rate

    def usage_half_life(self) -> float:
        return history.usage_half_life(self.half_life)

    def has_room(self) -> bool:
        """Whether the queue may hand out a job: fewer leased than its ``max_in_flight``.
        Only the queue is gated: its tenants' eligibility and tags are not touched."""
        return self.max_in_flight is None or self.in_flight < self.max_in_flight

    def index(self, tenant: Tenant) -> None:
        """Record the tenant's current start tag in the eligible heap."""
        self.versions += 1
        tenant.version = self.versions
        head = tenant.head_seq()
        if tenant.start is not None and head is not None:
            heapq.heappush(self.eligible, (tenant.start, head, tenant.name, tenant.version))

    def first_eligible(self) -> Tenant | None:
        while self.eligible:
            _, _, name, version = self.eligible[0]
            tenant = self.tenants.get(name)
            if tenant is not None and tenant.version == version and tenant.start is not None:
                return tenant
            heapq.heappop(self.eligible)
        return None
