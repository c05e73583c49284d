"""fairq: fair multi-tenant background jobs.

Jobs go into per-tenant queues; a weighted fair scheduler hands workers the next job so every
active tenant gets its share at once, capped in concurrency, without losing a job.
"""

from fairq.startup import catch_early as _catch_early  # isort: skip

# First, before the imports that take a while: in the `fairq` command (only), a SIGTERM or
# Ctrl-C while it starts is remembered, so a worker stops cleanly (fairq/startup.py).
_catch_early()

from fairq.app import App, Call, JobDefinition, Options
from fairq.app.iteration import IterativeJob
from fairq.contract import KEEP, Backend, CancelOutcome, QueueSettings, TenantStats
from fairq.current import JobContext, NoCurrentJob, current_job
from fairq.errors import (
    ConfigError,
    CursorError,
    FairqError,
    InvalidTenant,
    JobArgumentsError,
    JobCancelled,
    JobFailed,
    LeaseError,
    LeaseExpired,
    LeaseNotFound,
    MissingTenant,
    NoResult,
    PayloadTooLarge,
    ResultError,
    ResultTimeout,
    ResultTooLarge,
    SchemaError,
    StoreUnavailable,
    UnknownJob,
)
from fairq.job import JobInfo, JobState, Lease, Progress
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle

__version__ = "0.1.0.dev0"

__all__ = [
    "KEEP",
    "App",
    "Backend",
    "Call",
    "CancelOutcome",
    "ConfigError",
    "CursorError",
    "FairqError",
    "InvalidTenant",
    "IterativeJob",
    "JobArgumentsError",
    "JobCancelled",
    "JobContext",
    "JobDefinition",
    "JobFailed",
    "JobInfo",
    "JobState",
    "Lease",
    "LeaseError",
    "LeaseExpired",
    "LeaseNotFound",
    "MissingTenant",
    "NoCurrentJob",
    "NoResult",
    "Options",
    "PayloadTooLarge",
    "Progress",
    "QueueSettings",
    "Rate",
    "ResultError",
    "ResultTimeout",
    "ResultTooLarge",
    "SchemaError",
    "StoreUnavailable",
    "TenantStats",
    "Throttle",
    "UnknownJob",
    "__version__",
    "current_job",
]
