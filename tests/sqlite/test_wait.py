"""``wait`` sleeps until a commit (from this object, another connection, or the timeout)."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import DequeueParams, EnqueueParams, WaitParams
from tests.sqlite.helpers import new_job


def _wait_in_thread(backend: SQLiteBackend) -> threading.Event:
    returned = threading.Event()

    def run() -> None:
        backend.wait(WaitParams(queues=["default"], timeout=60.0))
        returned.set()

    threading.Thread(target=run, daemon=True).start()
    return returned


def test_wait_returns_when_another_connection_commits(
    backend: SQLiteBackend, db_path: Path
) -> None:
    other = SQLiteBackend(db_path)
    try:
        returned = _wait_in_thread(backend)
        ids = itertools.count()
        # Commit until the waiter notices (it may not have started waiting before the first).
        while not returned.wait(0.02):
            other.enqueue(EnqueueParams(jobs=[new_job(f"j{next(ids)}")], now=0.0))
        assert next(ids) < 1000
    finally:
        other.close()


def test_wait_returns_when_this_object_commits_from_another_thread(
    backend: SQLiteBackend,
) -> None:
    returned = _wait_in_thread(backend)
    ids = itertools.count()
    while not returned.wait(0.02):
        backend.enqueue(EnqueueParams(jobs=[new_job(f"j{next(ids)}")], now=0.0))
    assert next(ids) < 1000


def test_wait_returns_at_its_timeout(backend: SQLiteBackend) -> None:
    started = time.monotonic()
    backend.wait(WaitParams(queues=["default"], timeout=0.05))
    assert time.monotonic() - started >= 0.05


@pytest.mark.timeout(10)  # a wait that close() cannot end would fail here
def test_close_ends_a_wait(backend: SQLiteBackend) -> None:
    returned = _wait_in_thread(backend)
    while not returned.wait(0.02):
        backend.close()


def test_empty_dequeues_do_not_wake_waiters(backend: SQLiteBackend) -> None:
    """Idle workers sharing one object must not wake each other in a loop."""
    waited: list[float] = []

    def run() -> None:
        started = time.monotonic()
        backend.wait(WaitParams(queues=["default"], timeout=0.2))
        waited.append(time.monotonic() - started)

    waiter = threading.Thread(target=run)
    waiter.start()
    params = DequeueParams(queues=["default"], worker_id="idle", now=0.0)
    while waiter.is_alive():
        assert backend.dequeue(params).leases == []
    assert waited[0] >= 0.2
