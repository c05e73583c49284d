"""The SQLite store keeps figures only for the window: a write in a new slot deletes the rows
of slots that left it (fairq/backends/sqlite/figures.py)."""

from __future__ import annotations

from pathlib import Path

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import DequeueParams, EnqueueParams
from fairq.policy import histogram
from tests.sqlite.helpers import new_job, raw_connect


def slots(path: Path) -> list[int]:
    with raw_connect(path) as db:
        return [row[0] for row in db.execute("SELECT DISTINCT slot FROM figures ORDER BY slot")]


def take(backend: SQLiteBackend, now: float) -> None:
    params = DequeueParams(queues=["default"], worker_id="w", now=now)
    assert backend.dequeue(params).leases


def test_rows_of_slots_out_of_the_window_are_deleted_by_a_later_write(
    backend: SQLiteBackend, db_path: Path
) -> None:
    jobs = [new_job(f"j{n}", f"t{n}", lease=1e6) for n in range(4)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    take(backend, 10.0)  # slot 0
    take(backend, 130.0)  # slot 2
    assert slots(db_path) == [0, 2]
    take(backend, histogram.WINDOW + 10.0)  # slot 10: slot 0 left the window, slot 2 not
    assert slots(db_path) == [2, 10]
    take(backend, 2 * histogram.WINDOW)  # slot 20: only its own is left
    assert slots(db_path) == [20]
