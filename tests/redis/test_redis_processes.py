"""Faults with real worker processes on a real Redis: SIGKILL mid-job, killed connections."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis_apps import make_app
from redis_helpers import wait_for

from fairq import App, JobState

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.redis.redis_apps:app"
DEADLINE = 90.0  # only so a broken worker fails a test instead of hanging it

pytestmark = pytest.mark.processes


class Workers:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "FAIRQ_TEST_URL": self.url}
        env.pop("FAIRQ_URL", None)
        log = open(self.tmp / f"worker{len(self.started)}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m", "fairq", "worker", APP, *args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self.started.append(process)
        return process

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.tmp.glob("worker*.log"))


@pytest.fixture
def app(redis_url: str, raw: redis.Redis, prefix: str) -> Iterator[App]:
    made = make_app(f"{redis_url}?prefix={prefix}")
    yield made
    made.close()


@pytest.fixture
def workers(app: App, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(app.url, tmp_path)
    yield started
    for process in started.started:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _state(app: App, job_id: str) -> JobState | None:
    info = app.job_info(job_id)
    return info.state if info else None


def done(workdir: Path) -> set[str]:
    folder = workdir / "done"
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def test_sigkill_mid_job_runs_it_again_after_its_lease_and_frees_the_slot(
    app: App, workers: Workers, tmp_path: Path
) -> None:
    wd = str(tmp_path)
    app.set_tenant("default", "t1", max_running=1)
    hangs = app.jobs["hang_once"].enqueue("t1", wd, "a")
    queued = app.jobs["touch"].enqueue("t1", wd, "b")  # waits for t1's only slot
    first = workers.start()
    wait_for(lambda: (tmp_path / "started" / "a").exists(), "the job to start")
    first.kill()
    assert first.wait(timeout=30) == -signal.SIGKILL
    second = workers.start()
    wait_for(lambda: done(tmp_path) == {"a", "b"}, "both jobs to run")
    wait_for(lambda: _state(app, queued) is JobState.SUCCEEDED, "the second job to succeed")
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=DEADLINE) == 0, workers.logs()
    info = app.job_info(hangs)
    assert info is not None and (info.state, info.attempts) == (JobState.SUCCEEDED, 2)
    assert (tmp_path / "done" / "a").read_text() == str(second.pid)
    queued_info = app.job_info(queued)
    assert queued_info is not None and queued_info.state is JobState.SUCCEEDED
    (row,) = app.stats(queue="default", tenant="t1")
    assert (row.running, row.succeeded) == (0, 2)


def test_killed_connections_are_reopened_and_no_job_is_lost(
    app: App, workers: Workers, tmp_path: Path, raw: redis.Redis
) -> None:
    wd = str(tmp_path)
    total = 400
    calls = [app.jobs["touch"].call(f"t{n % 7}", wd, str(n)) for n in range(total)]
    app.enqueue_many(calls)
    for _ in range(2):
        workers.start("--concurrency", "2")
    kills = 0
    while len(done(tmp_path)) < total and kills < 20:
        wait_for(lambda k=kills: len(done(tmp_path)) >= (k + 1) * total // 25, "progress")
        kills += 1
        raw.client_kill_filter(_type="normal", skipme=True)
    wait_for(lambda: len(done(tmp_path)) == total, f"all {total} jobs to run")
    wait_for(
        lambda: sum(r.succeeded for r in app.stats(queue="default")) == total,
        "every job to be recorded as succeeded",
    )
    assert all(w.poll() is None for w in workers.started), workers.logs()
    assert kills >= 5
    rows = app.stats(queue="default")
    assert sum(r.ready + r.running + r.scheduled + r.dead for r in rows) == 0
