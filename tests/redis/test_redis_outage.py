"""A Redis that goes away under a running worker: what the heartbeat says about it.

Runs a private ``redis-server`` (no persistence) on a free port, so stopping it harms no other
test: when it comes back empty, the held lease is gone, and the warning must name the outage,
not a slow worker.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis
from redis_helpers import wait_for

from fairq.backends.redis import RedisBackend
from fairq.contract import DequeueParams, EnqueueParams
from fairq.job import NewJob
from fairq.worker.heartbeat import Heartbeat
from fairq.worker.running import RunningJobs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start(port: int) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not on PATH: this test starts a private one")
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    wait_for(lambda: _answers(client), "the private redis-server to answer")
    return server


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.fixture
def port() -> Iterator[int]:
    port = _free_port()
    server = _start(port)
    yield port
    server.terminate()
    server.wait()


def test_a_lease_lost_to_an_outage_is_reported_as_one(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    backend = RedisBackend.from_url(f"redis://127.0.0.1:{port}/0")
    now = time.time()
    job = NewJob(id="j1", name="task", queue="default", tenant="t", payload='{"args":[]}',
                 run_at=now, max_attempts=3, lease_timeout=60.0, cost=1.0)  # fmt: skip
    backend.enqueue(EnqueueParams(jobs=[job], now=now))
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now))
    running = RunningJobs(1)
    running.add(lease)
    beat = Heartbeat(backend, running, clock=time.time, interval=0.05)
    with caplog.at_level(logging.WARNING, logger="fairq.worker"):
        beat.start()
        try:
            redis.Redis(port=port).shutdown(nosave=True)
            wait_for(lambda: _said(caplog, "heartbeat failed"), "a heartbeat to fail")
            server = _start(port)  # back, and empty: the lease is gone
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
    assert "the store could not be reached" in lost.getMessage()
    assert "too slow" not in lost.getMessage()


def _said(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in record.getMessage() for record in caplog.records)
