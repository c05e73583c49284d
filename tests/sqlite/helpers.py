"""Job builders for the SQLite tests; times are explicit ``now`` values, never the clock."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from fairq.job import NewJob


def new_job(
    job_id: str,
    tenant: str = "a",
    *,
    queue: str = "default",
    run_at: float = 0.0,
    priority: int = 0,
    max_attempts: int = 3,
    lease: float = 30.0,
) -> NewJob:
    return NewJob(
        id=job_id,
        name="task",
        queue=queue,
        tenant=tenant,
        payload='{"args":[],"kwargs":{}}',
        priority=priority,
        run_at=run_at,
        max_attempts=max_attempts,
        lease_timeout=lease,
        cost=1.0,
    )


def raw_connect(path: Path) -> closing[sqlite3.Connection]:
    """A plain connection (autocommit) that is closed, not just committed, on leaving ``with``."""
    return closing(sqlite3.connect(path, isolation_level=None))
