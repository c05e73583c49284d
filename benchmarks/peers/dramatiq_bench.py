"""Dramatiq: ``send`` one message per call; ``dramatiq --processes 2`` (default 8 threads each).

``dramatiq_bench.py N empty`` sends an actor that does nothing instead of the ``INCR`` every
system's job does; completions are then counted as Dramatiq's message hash empties (it deletes
a message when it acks it). Run it with the Dramatiq environment's Python, from this folder.
"""

import sys

from _drive import counter, measure, report
from dramatiq_jobs import empty, noop

n = int(sys.argv[1])
actor = empty if sys.argv[2:] == ["empty"] else noop
finished = None
if actor is empty:
    client = counter()
    finished = lambda: n - client.hlen("dramatiq:default.msgs")  # noqa: E731


def enqueue(count: int) -> None:
    for i in range(count):
        actor.send(f"t{i % 10}")


worker = [sys.executable, "-m", "dramatiq", "dramatiq_jobs", "--processes", "2"]
report(measure(n, enqueue, [worker], finished=finished))
