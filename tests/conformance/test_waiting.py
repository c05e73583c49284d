"""A dequeue that waits first (``DequeueParams.wait``): it takes what arrives while it waits,
at a time no earlier than its ``now``, and gives nothing when nothing arrives.

A wait may end early ("new work may have arrived": PostgreSQL's first wait on a channel does),
so takers ask again until they get a job, as the worker's fetch loop does.
"""

from __future__ import annotations

import threading
import time

from fairq.contract import Backend, DequeueParams
from fairq.job import Lease

from .helpers import Q, enqueue, new_job

BOUND = 30.0  # only so a wake-up that never comes fails the test instead of hanging it
#: Far beyond BOUND: a job taken within BOUND was woken for; the wait cannot have timed out.
LONG_WAIT = 3600.0


def waiting_take(backend: Backend, now: float, wait: float) -> list[Lease]:
    return backend.dequeue(DequeueParams(queues=[Q], worker_id="w1", now=now, wait=wait)).leases


def take_when_it_comes(
    backend: Backend, now: float, into: list[Lease], asking: threading.Event
) -> None:
    end = time.monotonic() + BOUND
    while not into and time.monotonic() < end:
        asking.set()
        into.extend(waiting_take(backend, now, LONG_WAIT))


def test_a_waiting_dequeue_takes_a_job_enqueued_while_it_waits(backend: Backend) -> None:
    """The enqueue must wake the wait: the wait is an hour long, so a store that never wakes
    leaves the taker waiting when the join below gives up, and the test fails."""
    taken: list[Lease] = []
    asking = threading.Event()
    taker = threading.Thread(
        target=take_when_it_comes, args=(backend, 100.0, taken, asking), daemon=True
    )
    taker.start()
    assert asking.wait(BOUND)
    enqueue(backend, [new_job(1)], now=100.0)
    taker.join(BOUND)
    assert not taker.is_alive(), "the enqueue did not wake the waiting dequeue"
    assert [lease.job_id for lease in taken] == ["j1"]
    assert taken[0].started_at >= 100.0


def test_a_waiting_dequeue_with_nothing_arriving_gives_nothing(backend: Backend) -> None:
    enqueue(backend, [new_job(1, queue="elsewhere")], now=100.0)
    assert waiting_take(backend, 100.0, 0.05) == []


def test_work_that_came_between_an_empty_look_and_a_wait_ends_the_wait(backend: Backend) -> None:
    """A taker looks (nothing), the job arrives, then the same taker waits: the arrival must
    not be missed because it came before the wait began (the relay's and the worker's loops do
    just this). The wait is an hour long; only the arrival can end it within BOUND."""
    taken: list[Lease] = []
    looked, arrived = threading.Event(), threading.Event()

    def look_then_wait() -> None:
        taken.extend(waiting_take(backend, 100.0, 0.0))
        looked.set()
        arrived.wait(BOUND)
        taken.extend(waiting_take(backend, 100.0, LONG_WAIT))

    taker = threading.Thread(target=look_then_wait, daemon=True)
    taker.start()
    assert looked.wait(BOUND)
    enqueue(backend, [new_job(1)], now=100.0)
    arrived.set()
    taker.join(BOUND)
    assert not taker.is_alive(), "the waiting dequeue missed the job that came before it"
    assert [lease.job_id for lease in taken] == ["j1"]
