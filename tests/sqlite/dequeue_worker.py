"""A worker process for test_processes.py: dequeue and ack until nothing is ready.

Run as ``python dequeue_worker.py DB_PATH``. Prints ``ready`` once the store is open, waits
for a line on stdin (so both processes start together), then prints the ids it acked as JSON.
"""

from __future__ import annotations

import json
import sys

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import AckParams, DequeueParams
from fairq.job import Lease


def main(path: str) -> None:
    backend = SQLiteBackend(path)
    print("ready", flush=True)
    sys.stdin.readline()
    done: list[str] = []
    for batch in iter(lambda: _take(backend, 1 + len(done) % 3), []):
        for lease in batch:
            backend.ack(AckParams(token=lease.token, now=2.0))
            done.append(lease.job_id)
    backend.close()
    print(json.dumps(done), flush=True)


def _take(backend: SQLiteBackend, limit: int) -> list[Lease]:
    params = DequeueParams(queues=["default"], worker_id="proc", now=1.0, limit=limit)
    return list(backend.dequeue(params))


if __name__ == "__main__":
    main(sys.argv[1])
