"""Another connection holding the write lock delays an operation; it never breaks it."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import EnqueueParams, StatsParams
from fairq.errors import StoreUnavailable
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
