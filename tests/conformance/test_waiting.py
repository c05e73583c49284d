"""A dequeue that waits first (``DequeueParams.wait``): it takes what arrives while it waits,
at a time no earlier than its ``now``, and gives nothing when nothing arrives.

A wait may end early ("new work may have arrived": PostgreSQL's first wait on a channel does),
so takers ask again until they get a job, as the worker's fetch loop does.
"""

from __future__ import annotations

import threading
import time

import pytest

from fairq.contract import Backend, DequeueParams
from fairq.job import Lease

from .helpers import Q, enqueue, new_job

BOUND = 10.0  # only so a wake-up that never comes fails the test instead of hanging it


def waiting_take(backend: Backend, now: float, wait: float) -> list[Lease]:
    return backend.dequeue(DequeueParams(queues=[Q], worker_id="w1", now=now, wait=wait)).leases


def take_when_it_comes(backend: Backend, now: float, into: list[Lease]) -> None:
    end = time.monotonic() + BOUND
    while not into and time.monotonic() < end:
        into.extend(waiting_take(backend, now, BOUND))


@pytest.mark.timeout(60)
def test_a_waiting_dequeue_takes_a_job_enqueued_while_it_waits(backend: Backend) -> None:
    taken: list[Lease] = []
    taker = threading.Thread(target=take_when_it_comes, args=(backend, 100.0, taken))
    taker.start()
    time.sleep(0.2)  # most likely waiting by now; if not, it finds the job when its wait ends
    enqueue(backend, [new_job(1)], now=100.0)
    taker.join()
    assert [lease.job_id for lease in taken] == ["j1"]
    assert taken[0].started_at >= 100.0


def test_a_waiting_dequeue_with_nothing_arriving_gives_nothing(backend: Backend) -> None:
    enqueue(backend, [new_job(1, queue="elsewhere")], now=100.0)
    assert waiting_take(backend, 100.0, 0.05) == []
