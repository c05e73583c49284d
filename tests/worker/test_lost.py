"""A lost lease is explained by what became of the job, looked up in the store: gone, held by
another attempt, or back in its queue; never a guess ("the worker was too slow")."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fairq import App, JobState
from fairq.contract import DequeueParams, EnqueueParams, MaintainParams
from fairq.model import ReferenceModel
from fairq.worker import Worker
from fairq.worker.heartbeat import Heartbeat
from fairq.worker.running import RunningJobs

from .helpers import new_job, wait_for, wait_state


def _lost_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        str(getattr(r, "error", ""))
        for r in caplog.records
        if getattr(r, "outcome", None) == "lease_lost"
    ]


def _holding(app: App) -> tuple[threading.Event, threading.Event]:
    """A job ``hold`` (lease 1 s) that runs until the test lets it go."""
    started, finish = threading.Event(), threading.Event()

    @app.job(name="hold", tenant="tenant", lease=1.0)
    def hold(tenant: str) -> None:
        started.set()
        finish.wait(60)

    return started, finish


def test_an_ack_refused_because_the_store_lost_the_job_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.db"
    app = App(f"sqlite:///{path}")
    started, finish = _holding(app)
    job_id = app.jobs["hold"].enqueue("t1")
    try:
        with caplog.at_level(logging.DEBUG, logger="fairq.worker"), Worker(app).in_thread():
            assert started.wait(60)
            with sqlite3.connect(path) as db:  # the store loses the job's data
                db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
            finish.set()
            wait_for(lambda: _lost_errors(caplog), "the lost lease's record")
    finally:
        finish.set()
        app.close()
    [error] = _lost_errors(caplog)
    assert "the job no longer exists in the store" in error
    assert "went back to its queue" not in error


def _model(tmp: Path) -> App:
    return App("memory://")


def _sqlite(tmp: Path) -> App:
    return App(f"sqlite:///{tmp / 'q.db'}")


def _postgres(tmp: Path) -> App:
    from postgres._store import open_disposable

    return App(backend=open_disposable())


STORES: dict[str, Callable[[Path], App]] = {
    "model": _model,
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=list(STORES))
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    app = STORES[request.param](tmp_path)
    yield app
    app.close()


def test_an_ack_refused_because_another_attempt_holds_the_job_says_so(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    started, finish = _holding(app)
    job_id = app.jobs["hold"].enqueue("t1")
    try:
        worker = Worker(app, concurrency=1, heartbeat_interval=3600.0)  # no slot to retake it
        with caplog.at_level(logging.DEBUG, logger="fairq.worker"), worker.in_thread():
            assert started.wait(60)
            later = app.clock() + 10.0  # as if the worker had stalled past its lease
            app.backend.maintain(MaintainParams(now=later))
            ghost = DequeueParams(queues=["default"], worker_id="other", now=later)
            assert len(app.backend.dequeue(ghost).leases) == 1
            finish.set()
            wait_for(lambda: _lost_errors(caplog), "the lost lease's record")
    finally:
        finish.set()
    [error] = _lost_errors(caplog)
    assert "another attempt (attempt 2) holds the job now" in error
    assert "the lease expired" in error
    assert "too slow" not in error
    assert wait_state(app, job_id, JobState.RUNNING).attempts == 2


def test_a_heartbeat_that_finds_the_lease_expired_says_the_job_went_back_to_its_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = ReferenceModel()
    store.enqueue(EnqueueParams(jobs=[new_job("j1", lease_timeout=5.0)], now=time.time()))
    [lease] = store.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=time.time())
    ).leases
    store.maintain(MaintainParams(now=lease.deadline + 7.0))  # the lease ran out
    running = RunningJobs(1)
    running.add(lease)
    beat = Heartbeat(store, running, clock=lambda: lease.deadline + 8.0, interval=0.01)
    with caplog.at_level(logging.WARNING, logger="fairq.worker"):
        beat.start()
        try:
            wait_for(lambda: _warnings(caplog), "the lost lease's warning")
        finally:
            beat.stop()
    message = _warnings(caplog)[0]
    assert "the lease expired 8.0 s before this worker reported" in message
    assert "the job went back to its queue (ready)" in message
    assert "too slow" not in message


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "lost its lease" in r.getMessage()]
