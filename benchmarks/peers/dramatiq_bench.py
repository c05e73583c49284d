"""Dramatiq: ``send`` one message per call; ``dramatiq --processes 2`` (default 8 threads each)."""

import sys

from _drive import measure, report
from dramatiq_jobs import noop


def enqueue(n: int) -> None:
    for i in range(n):
        noop.send(f"t{i % 10}")


worker = [sys.executable, "-m", "dramatiq", "dramatiq_jobs", "--processes", "2"]
report(measure(int(sys.argv[1]), enqueue, [worker]))
