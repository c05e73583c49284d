"""Periodic jobs with real worker processes, several at once, on every store: each tick is
enqueued by exactly one of them and runs once, the others finding it already enqueued."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairq import App, JobState

from .helpers import wait_for
from .store_urls import KINDS, fresh_url

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.worker.periodic_app:app"
WORKERS = 3
TICKS = 6  # tick jobs to see succeed before stopping

pytestmark = pytest.mark.processes


@pytest.fixture(params=KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_url(request.param, tmp_path) as url:
        yield url


def start(url: str, workdir: Path, n: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FAIRQ_TEST_URL": url, "FAIRQ_TEST_WORKDIR": str(workdir)}
    env.pop("FAIRQ_URL", None)
    with open(workdir / f"worker{n}.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "fairq", "--log-level", "debug", "worker", APP],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def test_every_tick_is_enqueued_by_one_worker_and_runs_once(url: str, tmp_path: Path) -> None:
    app = App(url)
    app.publish()  # creates the store (and its schema) before the workers race to
    workers = [start(url, tmp_path, n) for n in range(WORKERS)]
    try:

        def succeeded() -> int:
            rows = app.stats(queue="default", tenant="acme")
            return rows[0].succeeded if rows else 0

        wait_for(lambda: succeeded() >= TICKS, f"{TICKS} ticks to run", timeout=90.0)
    finally:
        for process in workers:
            process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=60) for process in workers]
    logs = [(tmp_path / f"worker{n}.log").read_text(errors="replace") for n in range(WORKERS)]
    assert codes == [0] * WORKERS, "\n".join(logs)
    every = "\n".join(logs)
    assert "periodic_failed" not in every and "Traceback" not in every, every
    # each tick enqueued by exactly one worker: the store's answer, not a lock of fairq's
    enqueued = Counter(re.findall(r"tick (\S+) enqueued as job (\S+)", every))
    assert enqueued and set(enqueued.values()) == {1}, enqueued
    ticks = Counter(tick for tick, _ in enqueued)
    assert set(ticks.values()) == {1}, ticks
    # the others did look, and got the job already there
    held = Counter(re.findall(r"tick (\S+) already enqueued \(job (\S+)\)", every))
    assert set(held) <= set(enqueued), (held, enqueued)
    assert held, "no worker found a tick already enqueued: the race was not run"
    # every tick's job is stored once and ran once
    ids = [job_id for _, job_id in enqueued]
    infos = [app.job_info(job_id) for job_id in ids]
    assert all(info is not None for info in infos)
    done = [info for info in infos if info is not None and info.state is JobState.SUCCEEDED]
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == len(done) >= TICKS
    app.close()
