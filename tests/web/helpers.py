"""Real processes for the dashboard tests (and docs/tools/screenshot.py): ``fairq dashboard``
and ``fairq worker`` started as a user would, and a flood of the demo's jobs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from fairq.app import App
from fairq.contract import DequeueParams, FailParams
from fairq.demo.jobs import WORK

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
DEADLINE = 30.0  # only so a broken dashboard fails a test instead of hanging it
T = TypeVar("T")


def wait_for(condition: Callable[[], T], what: str, timeout: float = DEADLINE) -> T:
    """Poll ``condition`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@dataclass
class Process:
    """A ``python -m fairq ...`` process whose output goes to a file."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(args: list[str], log_path: Path, cwd: Path = ROOT) -> Process:
    env = {k: v for k, v in os.environ.items() if k not in ("FAIRQ_URL", "FAIRQ_DASHBOARD_TOKEN")}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "fairq", *args],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return Process(process, log_path)


@dataclass
class Dashboard(Process):
    base: str = ""


def start_dashboard(url: str | None, workdir: Path, *extra: str, cwd: Path = ROOT) -> Dashboard:
    """``fairq dashboard --url URL --port 0 ...`` (no --url when ``url`` is None: the App's
    store), run in ``cwd``; waits for the address it prints."""
    log_path = workdir / f"dashboard-{time.monotonic_ns()}.log"
    store = [] if url is None else ["--url", url]
    started = start(["dashboard", *store, "--port", "0", *extra], log_path, cwd)

    def address() -> str | None:
        if started.process.poll() is not None:
            raise AssertionError(f"the dashboard exited:\n{started.log()}")
        found = re.search(r"fairq dashboard on (http://\S+/)", started.log())
        return found.group(1).rstrip("/") if found else None

    base = wait_for(address, "the dashboard's address in its log")
    return Dashboard(started.process, started.log_path, base)


def start_worker(url: str, workdir: Path, *extra: str) -> Process:
    log_path = workdir / f"worker-{time.monotonic_ns()}.log"
    return start(["worker", "fairq.demo.jobs:app", "--url", url, *extra], log_path)


def flood(app: App, greedy: int, small: int, per_small: int, seconds: float = 0.0) -> None:
    """The demo's flood: one greedy tenant's backlog, then a few small tenants' jobs."""
    job = app.jobs[WORK]
    app.enqueue_many(job.call("greedy", seconds) for _ in range(greedy))
    app.enqueue_many(
        job.call(f"small-{i + 1}", seconds) for i in range(small) for _ in range(per_small)
    )


def lease(app: App, queue: str, worker: str = "test") -> str:
    """Take the next job of ``queue`` (with a long lease) as a worker would; its tenant."""
    leases = app.backend.dequeue(
        DequeueParams(queues=[queue], worker_id=worker, now=app.clock(), limit=1)
    ).leases
    assert leases, f"nothing to take from {queue}"
    info = app.job_info(leases[0].job_id)
    assert info is not None
    return info.tenant


def make_dead(app: App, tenant: str, queue: str = "graveyard", error: str = "boom") -> str:
    """A job of ``tenant`` that failed with no retry left: dead. ``queue`` must be empty."""
    job_id = app.jobs[WORK].options(queue=queue).enqueue(tenant, 0.0)
    now = app.clock()
    (taken,) = app.backend.dequeue(
        DequeueParams(queues=[queue], worker_id="test", now=now, limit=1)
    ).leases
    assert taken.job_id == job_id
    app.backend.fail(FailParams(token=taken.token, now=now, error=error, retry_at=None))
    return job_id
