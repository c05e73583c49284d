"""fairq: fair multi-tenant background jobs.

Jobs go into per-tenant queues; a weighted fair scheduler hands workers the next job so every
active tenant gets its share at once, capped in concurrency, without losing a job.
"""

from fairq.app import App, Call, JobDefinition, Options
from fairq.contract import KEEP, Backend, QueueSettings, TenantStats
from fairq.errors import (
    ConfigError,
    CursorError,
    FairqError,
    InvalidTenant,
    JobArgumentsError,
    LeaseError,
    LeaseExpired,
    LeaseNotFound,
    MissingTenant,
    PayloadTooLarge,
    SchemaError,
    StoreUnavailable,
    UnknownJob,
)
from fairq.iteration import IterativeJob
from fairq.job import JobInfo, JobState, Lease, Progress
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle

__version__ = "0.1.0.dev0"

__all__ = [
    "KEEP",
    "App",
    "Backend",
    "Call",
    "ConfigError",
    "CursorError",
    "FairqError",
    "InvalidTenant",
    "IterativeJob",
    "JobArgumentsError",
    "JobDefinition",
    "JobInfo",
    "JobState",
    "Lease",
    "LeaseError",
    "LeaseExpired",
    "LeaseNotFound",
    "MissingTenant",
    "Options",
    "PayloadTooLarge",
    "Progress",
    "QueueSettings",
    "Rate",
    "SchemaError",
    "StoreUnavailable",
    "TenantStats",
    "Throttle",
    "UnknownJob",
    "__version__",
]
