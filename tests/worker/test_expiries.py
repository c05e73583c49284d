"""Leases that expire under a worker's calls (its dequeues and its maintenance) are logged, one
WARNING each with the job's fields, and counted in the line the worker logs when it stops."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fairq import App, JobState
from fairq.contract import DequeueParams
from fairq.worker import Worker

from .conftest import Store
from .helpers import marks, wait_for, wait_state


def _records(caplog: pytest.LogCaptureFixture, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", None) == action]


@pytest.mark.processes
def test_the_lease_of_a_killed_worker_is_logged_and_counted_by_the_worker_that_expires_it(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    wd = str(store.workdir)
    job_id = store.app.jobs["first_run_hangs"].enqueue("acme", wd, "a")  # lease: 1 s
    killed = store.worker()
    wait_for(lambda: "a" in marks(store.workdir, "started"), "the job to start")
    killed.process.kill()
    assert killed.exit_code() == -signal.SIGKILL
    with caplog.at_level(logging.INFO, logger="fairq.worker"), Worker(store.app).in_thread():
        wait_state(store.app, job_id, JobState.SUCCEEDED)
    [expired] = _records(caplog, "lease_expired")
    assert expired.levelno == logging.WARNING
    fields = {k: getattr(expired, k) for k in ("job_id", "job_name", "tenant", "queue")}
    assert fields == {
        "job_id": job_id,
        "job_name": "first_run_hangs",
        "tenant": "'acme'",
        "queue": "default",
    }
    assert (expired.attempt, expired.outcome) == (1, "retrying")
    assert "it will run again" in expired.getMessage()
    [stopped] = _records(caplog, "worker_stop")
    assert stopped.expired_leases == 1
    assert "expired leases found: 1" in stopped.getMessage()


def _model() -> App:
    return App("memory://")


def _sqlite(tmp_path: Path) -> App:
    return App(f"sqlite:///{tmp_path / 'q.db'}")


def _postgres() -> App:
    from postgres._store import open_disposable

    return App(backend=open_disposable())


STORES: dict[str, Callable[[Path], App]] = {
    "model": lambda tmp: _model(),
    "sqlite": _sqlite,
    "postgres": lambda tmp: _postgres(),
}


@pytest.fixture(params=list(STORES))
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    app = STORES[request.param](tmp_path)
    yield app
    app.close()


def test_an_expired_last_attempt_is_logged_as_dead(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.job(name="once", tenant="tenant", max_attempts=1, lease=0.2)
    def once(tenant: str) -> None:
        raise AssertionError("a dead job never runs")

    job_id = once.enqueue("t1")
    app.publish()
    ghost = DequeueParams(queues=["default"], worker_id="ghost", now=app.clock())
    [lease] = app.backend.dequeue(ghost).leases  # a worker that dies holding it
    worker = Worker(app, poll_interval=0.05)
    with caplog.at_level(logging.INFO, logger="fairq.worker"), worker.in_thread():
        wait_state(app, job_id, JobState.DEAD)
        wait_for(lambda: _records(caplog, "lease_expired"), "the expiry's record")
    [expired] = _records(caplog, "lease_expired")
    assert (expired.job_id, expired.attempt, expired.outcome) == (lease.job_id, 1, "dead")
    assert "it is dead now" in expired.getMessage()
    [stopped] = _records(caplog, "worker_stop")
    assert (stopped.expired_leases, stopped.expired_dead) == (1, 1)


def test_a_relays_lapsed_hold_is_logged_as_handed_back_not_as_a_failed_attempt(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """A relay that died holding a job no peer's worker claimed: the worker whose dequeue finds
    the lapsed hold says so at INFO (no worker died, no attempt is spent), and runs the job."""
    ran = []

    @app.job(name="relayed", tenant="tenant", max_attempts=1)
    def relayed(tenant: str) -> None:
        ran.append(tenant)

    job_id = relayed.enqueue("t1")
    app.publish()
    relay = DequeueParams(queues=["default"], worker_id="relay", now=app.clock(), hold=1.0)
    assert len(app.backend.dequeue(relay).leases) == 1  # then the relay dies
    with caplog.at_level(logging.INFO, logger="fairq.worker"), Worker(app).in_thread():
        wait_state(app, job_id, JobState.SUCCEEDED)
    [lapsed] = _records(caplog, "lease_expired")
    assert (lapsed.levelno, lapsed.outcome, lapsed.attempt) == (logging.INFO, "handed_back", 1)
    assert "no worker claimed it" in lapsed.getMessage()
    assert "the attempt not counted" in lapsed.getMessage()
    assert ran == ["t1"]  # its one attempt was still there
