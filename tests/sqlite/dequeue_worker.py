"""A worker process for test_processes.py: dequeue and ack until nothing is ready.

Run as ``python dequeue_worker.py DB_PATH INDEX``. Prints ``ready`` once the store is open,
waits for a line on stdin (so both processes start together), takes a first batch, and holds it
until the other process has taken one too (files ``DB_PATH.took.INDEX`` tell them apart), so both
provably dequeue while the other holds leases. Then prints the ids it acked as JSON.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import AckManyParams, DequeueParams
from fairq.job import Lease


def main(path: str, index: str) -> None:
    backend = SQLiteBackend(path)
    print("ready", flush=True)
    sys.stdin.readline()
    done: list[str] = []
    batch = _take(backend, 1)
    Path(f"{path}.took.{index}").touch()
    _await_other(path, index)
    while batch:
        for lease in batch:
            backend.ack_many(AckManyParams(tokens=[lease.token], now=2.0))
            done.append(lease.job_id)
        batch = _take(backend, 1 + len(done) % 3)
    backend.close()
    print(json.dumps(done), flush=True)


def _await_other(path: str, index: str, limit: float = 60.0) -> None:
    """Bounded, so a broken peer fails the test instead of hanging it."""
    other = Path(f"{path}.took.{1 - int(index)}")
    deadline = time.monotonic() + limit
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _take(backend: SQLiteBackend, limit: int) -> list[Lease]:
    params = DequeueParams(queues=["default"], worker_id="proc", now=1.0, limit=limit)
    return list(backend.dequeue(params).leases)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
