"""A Redis that goes away under a running worker, and comes back.

Each test runs a private ``redis-server`` on a free port, so stopping it harms no other test.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis_helpers import free_port, start_server, wait_for

from fairq import App, JobInfo, JobState
from fairq.backends.redis import RedisBackend
from fairq.contract import DequeueParams, EnqueueParams
from fairq.job import NewJob
from fairq.worker import Worker
from fairq.worker.heartbeat import Heartbeat
from fairq.worker.running import RunningJobs


@pytest.fixture
def port() -> Iterator[int]:
    port = free_port()
    server = start_server(port)
    yield port
    server.terminate()
    server.wait()


def test_a_lease_lost_to_an_outage_is_reported_as_one(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The server comes back empty: the lease is gone, and the warning names the outage."""
    backend = RedisBackend.from_url(f"redis://127.0.0.1:{port}/0")
    now = time.time()
    job = NewJob(id="j1", name="task", queue="default", tenant="t", payload='{"args":[]}',
                 run_at=now, max_attempts=3, lease_timeout=60.0, cost=1.0)  # fmt: skip
    backend.enqueue(EnqueueParams(jobs=[job], now=now))
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases
    running = RunningJobs(1)
    running.add(lease)
    beat = Heartbeat(backend, running, clock=time.time, interval=0.05)
    with caplog.at_level(logging.WARNING, logger="fairq.worker"):
        beat.start()
        try:
            redis.Redis(port=port).shutdown(nosave=True)
            wait_for(lambda: _said(caplog, "heartbeat failed"), "a heartbeat to fail")
            server = start_server(port)  # back, and empty: the lease is gone
            try:
                wait_for(lambda: _said(caplog, "lost its lease"), "the lost lease's warning")
            finally:
                beat.stop()
                server.terminate()
                server.wait()
        finally:
            beat.stop()
            backend.close()
    (lost,) = [r for r in caplog.records if "lost its lease" in r.getMessage()]
    message = lost.getMessage()
    assert "could not reach the store" in message  # the outage, named
    assert "no longer exists in the store" in message  # what happened: its data was lost
    assert "went back to its queue" not in message and "too slow" not in message


def _said(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in record.getMessage() for record in caplog.records)


def test_an_ack_that_meets_an_outage_is_stored_once_the_store_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The job ends while Redis is down; Redis comes back with its data (append-only file):
    the ack is tried again and stored, so the job does not run a second time."""
    port = free_port()
    persist = ("--appendonly", "yes", "--appendfsync", "always", "--save", "",
               "--dir", str(tmp_path))  # fmt: skip
    servers = [start_server(port, *persist)]
    app = App(f"redis://127.0.0.1:{port}/0")

    @app.job(name="gated", tenant="tenant", lease=30.0)
    def gated(tenant: str) -> None:
        (tmp_path / "started").touch()
        wait_for(lambda: (tmp_path / "go").exists(), "the test to open the gate")

    try:
        job_id = gated.enqueue("t")
        logs = caplog.at_level(logging.WARNING, logger="fairq.worker")
        with logs, Worker(app, concurrency=1).in_thread():
            wait_for(lambda: (tmp_path / "started").exists(), "the job to start")
            redis.Redis(port=port).shutdown()
            (tmp_path / "go").touch()
            wait_for(
                lambda: _said(caplog, "could not store") or _said(caplog, "outcome=error"),
                "the ack to fail",
            )
            servers.append(start_server(port, *persist))
            info = wait_state(app, job_id, JobState.SUCCEEDED)
    finally:
        app.close()
        for server in servers:
            server.terminate()
            server.wait()
    assert info.attempts == 1


def wait_state(app: App, job_id: str, state: JobState) -> JobInfo:
    found: list[JobInfo] = []

    def reached() -> bool:
        info = app.job_info(job_id)
        if info is not None and info.state is state:
            found.append(info)
        return bool(found)

    wait_for(reached, f"job {job_id} to be {state}")
    return found[0]


def test_an_outage_is_logged_in_one_line_per_failure_without_a_traceback(
    port: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fetch loop, the heartbeat and maintenance each say the store cannot be reached,
    naming it, in one line (as on PostgreSQL): StoreUnavailable says all there is to say."""
    app = App(f"redis://127.0.0.1:{port}/0")

    @app.job(name="gated", tenant="tenant", lease=30.0)
    def gated(tenant: str) -> None:
        (tmp_path / "started").touch()
        wait_for(lambda: (tmp_path / "go").exists(), "the test to open the gate")

    said = ("the store failed", "heartbeat failed", "maintenance failed")
    worker = Worker(app, concurrency=2, heartbeat_interval=0.1, maintenance_interval=0.1)
    try:
        gated.enqueue("t")
        with caplog.at_level(logging.INFO, logger="fairq.worker"), worker.in_thread():
            wait_for(lambda: (tmp_path / "started").exists(), "the job to start")
            redis.Redis(port=port).shutdown(nosave=True)
            for text in said:
                wait_for(lambda text=text: _said(caplog, text), f"{text!r} in the log")
            (tmp_path / "go").touch()
            worker.stop(hand_back_now=True)
    finally:
        app.close()
    failed = [r for r in caplog.records if any(t in r.getMessage() for t in said)]
    assert all("cannot reach Redis at redis://127.0.0.1:" in r.getMessage() for r in failed)
    assert [r for r in caplog.records if r.exc_info] == []
