"""RQ: ``Queue.enqueue`` one job per call; two standard ``rq worker`` processes (fork per job)."""

import sys

from _drive import URL, counter, measure, report
from rq import Queue
from rq_jobs import noop


def enqueue(n: int) -> None:
    queue = Queue("default", connection=counter())
    for i in range(n):
        queue.enqueue(noop, f"t{i % 10}")


worker = [sys.executable, "-m", "rq.cli", "worker", "--url", URL, "--quiet", "default"]
report(measure(int(sys.argv[1]), enqueue, [worker, worker]))
