"""Celery: ``delay`` one task per call; one worker with the default prefork pool, 2 processes."""

import sys

from _drive import measure, report
from celery_jobs import noop


def enqueue(n: int) -> None:
    for i in range(n):
        noop.delay(f"t{i % 10}")


worker = [
    sys.executable, "-m", "celery", "-A", "celery_jobs", "worker", "--concurrency", "2",
    "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat",
]  # fmt: skip
report(measure(int(sys.argv[1]), enqueue, [worker]))
