"""Real worker processes (``python -m fairq worker``) on a real SQLite file per test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fairq import App

from .apps import make_app
from .helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]  # the repository: where tests.worker.apps imports from
APP = "tests.worker.apps:app"


@dataclass
class WorkerProcess:
    """One ``fairq worker`` process; its log (stderr and stdout) goes to a file."""

    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str) -> None:
        wait_for(lambda: text in self.log(), f"{text!r} in the worker's log")

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def exit_code(self) -> int:
        """Wait for the process to end; its exit code."""
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the worker did not exit; its log:\n{self.log()}") from None


@dataclass
class Store:
    """A fresh SQLite store, an App on it for the test's side, and workers started on it."""

    url: str
    app: App
    workdir: Path
    started: list[WorkerProcess] = field(default_factory=list)

    def worker(self, *args: str, log_level: str = "info", app: str = APP) -> WorkerProcess:
        log_path = self.workdir / f"worker{len(self.started)}.log"
        env = {**os.environ, "FAIRQ_TEST_URL": self.url}
        env["FAIRQ_TEST_LOADED"] = str(self.workdir / "loaded")  # tests.worker.slow_app
        env.pop("FAIRQ_URL", None)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "fairq", "--log-level", log_level, "worker", app, *args],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        started = WorkerProcess(process, log_path)
        self.started.append(started)
        return started


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    app = make_app(url)
    app.publish()
    workdir = tmp_path / "work"
    workdir.mkdir()
    store = Store(url=url, app=app, workdir=workdir)
    yield store
    for worker in store.started:
        if worker.process.poll() is None:
            _kill_tree(worker.process)
    app.close()


def _kill_tree(process: subprocess.Popen[bytes]) -> None:
    """Stop a worker left running by a failed test, with its children (--processes)."""
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGINT)  # the second one hands jobs back at once
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
