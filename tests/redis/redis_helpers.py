"""Small helpers for the Redis tests (this folder is not a package: a package named
``redis`` would hide redis-py, so modules here have names no other folder uses)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from fairq.job import NewJob


def new_job(n: int, tenant: str = "a", *, queue: str = "default", payload: str = "") -> NewJob:
    return NewJob(
        id=f"j{n}",
        name="task",
        queue=queue,
        tenant=tenant,
        payload=payload or f'{{"args":[{n}],"kwargs":{{}}}}',
        run_at=0.0,
        max_attempts=3,
        lease_timeout=30.0,
        cost=1.0,
    )


def keys_of(raw: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(raw.scan_iter(match=f"{prefix}:*"))


def wait_for(condition: Callable[[], object], what: str, timeout: float = 90.0) -> None:
    """Poll ``condition`` until it holds; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
