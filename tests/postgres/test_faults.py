"""Real worker processes against a real server: killed workers, killed connections.

Each test starts ``fairq worker`` processes on an app module written to a temporary directory,
waits on observable events (a marker file, job states in the store), never on fixed sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from fairq.contract import EnqueueParams, GetJobsParams, StatsParams, TenantSettingsParams
from fairq.job import JobState, NewJob, encode_payload

from ._store import DisposableBackend, server_url

pytestmark = pytest.mark.processes

APP = """
import os, pathlib, time
from fairq.app import App

app = App(os.environ["FAIRQ_URL"])
MARKS = pathlib.Path(os.environ["FAIRQ_TEST_MARKS"])


@app.job(tenant="tenant", lease=2.0)
def hang_once(tenant: str, name: str) -> None:
    '''The first run marks that it started, then hangs (to be killed); later runs finish.'''
    mark = MARKS / name
    if not mark.exists():
        mark.write_text("started")
        time.sleep(600)


@app.job(tenant="tenant", lease=3.0)
def quick(tenant: str, n: int) -> None:
    time.sleep(0.005)
"""

WAIT = 120.0  # safety limit for every wait on an event


@pytest.fixture
def app_dir(tmp_path: Path, pg: DisposableBackend) -> Path:
    (tmp_path / "faultapp.py").write_text(textwrap.dedent(APP))
    (tmp_path / "marks").mkdir()
    return tmp_path


@pytest.fixture
def workers(app_dir: Path, pg: DisposableBackend) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    url = f"{server_url()}?schema={pg.schema}&application_name=fairq-fault-{pg.schema}"

    def start(*args: str) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "FAIRQ_URL": url,
            "FAIRQ_TEST_MARKS": str(app_dir / "marks"),
            "PYTHONPATH": str(app_dir),
        }
        command = [sys.executable, "-c", "from fairq.cli import main; main()"]
        command += ["worker", "faultapp:app", *args]
        proc = subprocess.Popen(command, cwd=app_dir, env=env, text=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def enqueue(pg: DisposableBackend, name: str, tenant: str, arg: object, lease: float) -> str:
    """Enqueue a call of ``faultapp.<name>`` straight into the store (no App needed)."""
    job = NewJob(
        id=uuid.uuid4().hex,
        name=f"faultapp.{name}",
        queue="default",
        tenant=tenant,
        payload=encode_payload([tenant, arg], {}),
        run_at=time.time(),
        max_attempts=3,
        lease_timeout=lease,
        cost=1.0,
    )
    pg.enqueue(EnqueueParams(jobs=[job], now=time.time()))
    return job.id


def wait_for(what: str, check: Callable[[], bool], *alive: subprocess.Popen[str]) -> None:
    """Poll ``check`` until true; fail at once if a worker in ``alive`` has exited."""
    give_up = time.monotonic() + WAIT
    while not check():
        exited = [proc.returncode for proc in alive if proc.poll() is not None]
        assert not exited, f"a worker exited (codes {exited}) before {what}"
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def test_a_worker_killed_mid_job_loses_nothing_and_leaks_no_slot(
    pg: DisposableBackend, app_dir: Path, workers: Callable[..., subprocess.Popen[str]]
) -> None:
    pg.set_tenant(TenantSettingsParams(queue="default", tenant="acme", now=0.0, max_running=1))
    first = enqueue(pg, "hang_once", "acme", "first", lease=2.0)
    second = enqueue(pg, "quick", "acme", 0, lease=2.0)
    victim = workers("--concurrency", "2")
    wait_for("the first job started", (app_dir / "marks" / "first").exists, victim)
    (stats,) = pg.stats(StatsParams(queue="default", tenant="acme"))
    assert (stats.running, stats.ready) == (1, 1)  # the cap holds the second job back
    victim.send_signal(signal.SIGKILL)
    victim.wait()

    survivor = workers("--concurrency", "2")

    def both_done() -> bool:
        return {i.state for i in pg.get_jobs(GetJobsParams(ids=[first, second]))} == {
            JobState.SUCCEEDED
        }

    wait_for("both jobs succeeded", both_done, survivor)
    survivor.send_signal(signal.SIGTERM)
    assert survivor.wait(WAIT) == 0
    done = {info.id: info for info in pg.get_jobs(GetJobsParams(ids=[first, second]))}
    assert done[first].state is JobState.SUCCEEDED and done[first].attempts == 2
    assert done[second].state is JobState.SUCCEEDED
    (stats,) = pg.stats(StatsParams(queue="default", tenant="acme"))
    assert (stats.running, stats.ready, stats.succeeded, stats.failed) == (0, 0, 2, 1)


def terminate_worker_connections(pg: DisposableBackend) -> int:
    with psycopg.connect(server_url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (f"fairq-fault-{pg.schema}",),
        ).fetchone()
    return int(row[0]) if row else 0


def test_workers_ride_out_terminated_connections_and_lose_nothing(
    pg: DisposableBackend, app_dir: Path, workers: Callable[..., subprocess.Popen[str]]
) -> None:
    ids = [enqueue(pg, "quick", f"t{n % 5}", n, lease=3.0) for n in range(400)]
    procs = [workers("--concurrency", "4") for _ in range(2)]

    def succeeded() -> int:
        return sum(row.succeeded for row in pg.stats(StatsParams(queue="default")))

    for round_ in range(3):
        wait_for(f"progress {round_}", lambda r=round_: succeeded() > 60 * (r + 1), *procs)
        # Polled: right after the last round, the workers may not have reconnected yet.
        wait_for(
            f"a connection to cut {round_}", lambda: terminate_worker_connections(pg) > 0, *procs
        )
    wait_for("every job succeeded", lambda: succeeded() == len(ids), *procs)
    for proc in procs:
        assert proc.poll() is None  # still serving
        proc.send_signal(signal.SIGTERM)
    assert [proc.wait(WAIT) for proc in procs] == [0, 0]
    infos = pg.get_jobs(GetJobsParams(ids=ids))
    assert len(infos) == len(ids)
    assert {info.state for info in infos} == {JobState.SUCCEEDED}
    (row,) = {(r.ready, r.running, r.scheduled, r.dead) for r in pg.stats(StatsParams())}
    assert row == (0, 0, 0, 0)
