"""Histories recorded in real stores on the simulator's virtual clock: the real scheduler (the
store itself, through the Backend contract) runs a workload on W simulated workers, so every
job's enqueue, start and end in the store are known exactly, and a replay can be held to them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from fairq.backends.clock import Clock
from fairq.contract import Backend
from fairq.sim.engine import Record, SimJob, simulate
from fairq.sim.strategies.fairq import Fairq

QUEUE = "sim"  # the queue the simulator's fairq uses
KINDS = ("sqlite", "redis", "postgres")


@contextmanager
def opened(kind: str, tmp: Path) -> Iterator[tuple[str, Backend]]:
    """A fresh, empty store of ``kind`` on the caller's clock, and a URL that opens it again.
    A server that cannot be reached fails the test (never skips)."""
    if kind == "sqlite":
        from fairq.backends.sqlite import SQLiteBackend

        path = tmp / "history.db"
        backend: Backend = SQLiteBackend(path, clock=Clock.CALLER)
        url = f"sqlite:///{path}"
    elif kind == "redis":
        from fairq.backends.redis import RedisBackend

        base = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
        prefix = f"h{uuid.uuid4().hex[:8]}"
        url = f"{base}?prefix={prefix}&clock=caller"
        backend = RedisBackend.from_url(url)
    else:
        from postgres._store import open_disposable, server_url, with_option

        backend = open_disposable(clock="caller")
        url = with_option(with_option(server_url(), "schema", backend.schema), "clock", "caller")
    try:
        yield url, backend
    finally:
        if kind == "redis":
            client = backend.client  # type: ignore[attr-defined]
            keys = list(client.scan_iter(f"{prefix}:*"))
            if keys:
                client.delete(*keys)
        backend.close()


def record(
    backend: Backend,
    jobs: Sequence[SimJob],
    *,
    workers: int,
    weights: dict[str, float] | None = None,
) -> list[Record]:
    """Run ``jobs`` through ``backend``'s own scheduler on ``workers`` simulated workers (the
    store is the strategy: enqueue, dequeue, ack at each virtual instant)."""
    return simulate(jobs, Fairq(weights=weights, store=lambda: backend), workers=workers, seed=1)


def jobs_of(rows: Sequence[tuple[float, str, float]], name: str = "task") -> list[SimJob]:
    """(arrival, tenant, run time) rows as jobs that declare their run time as their cost."""
    ordered = sorted(rows, key=lambda r: r[0])
    return [
        SimJob(id=n, arrival=a, tenant=t, duration=d, cost=d, name=name)
        for n, (a, t, d) in enumerate(ordered)
    ]
