"""Another connection holding the write lock delays an operation; it never breaks it."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from fairq.backends.clock import Clock
from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import DequeueParams, EnqueueParams, GetJobsParams, StatsParams
from fairq.errors import StoreUnavailable
from fairq.job import Lease
from tests.sqlite.helpers import new_job, raw_connect


class _SignalOnRetry(logging.Handler):
    """Sets ``retrying`` when the backend reports it is backing off from a locked database."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.retrying = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "locked" in record.getMessage():
            self.retrying.set()


@pytest.fixture
def retry_signal() -> object:
    logger = logging.getLogger("fairq.backends.sqlite")
    handler = _SignalOnRetry()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def test_a_write_waits_out_another_connections_lock(
    db_path: Path, retry_signal: _SignalOnRetry
) -> None:
    backend = SQLiteBackend(db_path, busy_timeout=0.01, lock_wait=60.0)
    outcome: list[BaseException | None] = []

    def enqueue() -> None:
        try:
            backend.enqueue(EnqueueParams(jobs=[new_job("j1")], now=0.0))
            outcome.append(None)
        except BaseException as exc:  # reported to the test thread below
            outcome.append(exc)

    with raw_connect(db_path) as other:
        other.execute("BEGIN IMMEDIATE")
        writer = threading.Thread(target=enqueue)
        writer.start()
        assert retry_signal.retrying.wait(30), "the enqueue never met the lock"
        assert outcome == []  # still waiting while the lock is held
        other.execute("ROLLBACK")
    writer.join(30)
    try:
        assert outcome == [None]
        assert [s.ready for s in backend.stats(StatsParams())] == [1]
    finally:
        backend.close()


def test_a_lock_held_too_long_is_a_clear_error(db_path: Path) -> None:
    backend = SQLiteBackend(db_path, busy_timeout=0.01, lock_wait=0.05)
    try:
        with raw_connect(db_path) as other:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreUnavailable, match="stayed locked") as caught:
                backend.enqueue(EnqueueParams(jobs=[new_job("j1")], now=0.0))
            other.execute("ROLLBACK")
        assert str(db_path) in str(caught.value)
        assert backend.stats(StatsParams()) == []  # nothing half-written
    finally:
        backend.close()


def test_a_dequeue_that_waited_for_the_lock_starts_its_lease_after_the_wait(
    db_path: Path, retry_signal: _SignalOnRetry
) -> None:
    """The time of an event is the time the store performs it: a dequeue built before it
    waited for another process's write lock (a producer enqueuing) hands out a lease that
    starts once it holds the lock, so the lease is whole and the run is not charged the wait."""
    backend = SQLiteBackend(db_path, busy_timeout=0.01, lock_wait=60.0)  # clock=store
    taken: list[Lease] = []
    try:
        backend.enqueue(EnqueueParams(jobs=[new_job("j1", lease=30.0)], now=time.time()))
        asked_at = time.time()
        params = DequeueParams(queues=["default"], worker_id="w", now=asked_at)
        with raw_connect(db_path) as other:
            other.execute("BEGIN IMMEDIATE")
            worker = threading.Thread(target=lambda: taken.extend(backend.dequeue(params).leases))
            worker.start()
            assert retry_signal.retrying.wait(30), "the dequeue never met the lock"
            released_at = time.time()
            other.execute("ROLLBACK")
        worker.join(30)
        (lease,) = taken
        assert lease.started_at >= released_at > asked_at
        assert lease.deadline == lease.started_at + 30.0
        (info,) = backend.get_jobs(GetJobsParams(ids=["j1"]))
        assert info.enqueued_at <= info.started_at == lease.started_at
    finally:
        backend.close()


def test_a_virtual_clock_is_followed_exactly_even_after_a_lock(
    db_path: Path, retry_signal: _SignalOnRetry
) -> None:
    backend = SQLiteBackend(db_path, busy_timeout=0.01, lock_wait=60.0, clock=Clock.CALLER)
    taken: list[Lease] = []
    try:
        backend.enqueue(EnqueueParams(jobs=[new_job("j1", lease=30.0)], now=5.0))
        params = DequeueParams(queues=["default"], worker_id="w", now=7.0)
        with raw_connect(db_path) as other:
            other.execute("BEGIN IMMEDIATE")
            worker = threading.Thread(target=lambda: taken.extend(backend.dequeue(params).leases))
            worker.start()
            assert retry_signal.retrying.wait(30), "the dequeue never met the lock"
            other.execute("ROLLBACK")
        worker.join(30)
        assert [(lease.started_at, lease.deadline) for lease in taken] == [(7.0, 37.0)]
    finally:
        backend.close()
