"""The demo's scenario: sizes, tenants, and what a "mode" changes.

Both modes enqueue the same calls with the same arguments; the only difference is the tenant the
scheduler sees. FIFO puts every job under one shared tenant, so fairq's scheduler degenerates to
plain first-in-first-out — exactly what a Celery or RQ queue does. The real tenant stays in the
job's ``customer`` argument and in the demo's own bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

GREEDY = "greedy"
SHARED_TENANT = "everyone"


class Mode(str, Enum):
    FIFO = "fifo"
    FAIR = "fair"

    @property
    def label(self) -> str:
        return "FIFO (Celery/RQ order)" if self is Mode.FIFO else "fairq (fair per tenant)"

    def scheduling_tenant(self, customer: str) -> str:
        """The tenant the scheduler is told about for a job done for ``customer``."""
        return SHARED_TENANT if self is Mode.FIFO else customer


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """How big the flood is, who arrives after it, and what runs it.

    ``arrive_after``: the small tenants enqueue once this fraction of the greedy tenant's jobs
    has started — measured, not timed, so the small tenants land mid-flood on any machine.
    """

    greedy_jobs: int = 4000
    small_tenants: int = 4
    jobs_per_small: int = 5
    job_seconds: float = 0.005
    workers: int = 2
    concurrency: int = 4
    arrive_after: float = 0.1

    def __post_init__(self) -> None:
        for name in ("greedy_jobs", "small_tenants", "jobs_per_small", "workers", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 0 <= self.job_seconds <= 10:
            raise ValueError("job_seconds must be between 0 and 10")
        if not 0 <= self.arrive_after < 1:
            raise ValueError("arrive_after must be a fraction in [0, 1)")

    @property
    def small_names(self) -> list[str]:
        return [f"small-{i + 1}" for i in range(self.small_tenants)]

    @property
    def tenants(self) -> list[str]:
        return [GREEDY, *self.small_names]

    @property
    def total_jobs(self) -> int:
        return self.greedy_jobs + self.small_tenants * self.jobs_per_small

    @property
    def arrival_threshold(self) -> int:
        """How many greedy jobs must have started before the small tenants arrive."""
        return max(1, int(self.greedy_jobs * self.arrive_after))
