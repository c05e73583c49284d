"""Start and stop real ``fairq worker`` processes, the way a user would run them.

Each worker is its own OS process running ``python -m fairq worker MODULE:APP``, stopped with
SIGTERM (as a deploy would) once the demo has seen every job finish; it must exit 0. Not
``--burst``: a burst worker exits when nothing is ready, and a run's greedy jobs may all be done
before the small tenants arrive. Output goes to a log file, shown only when a worker fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fairq.errors import FairqError


class WorkerFailed(FairqError):
    """A worker process exited with an error; its log tail is in the message."""


@dataclass
class WorkerGroup:
    """Worker processes started together; the group owns exactly the processes it started."""

    processes: list[subprocess.Popen[bytes]]
    logs: list[Path]

    def running(self) -> int:
        return sum(1 for p in self.processes if p.poll() is None)

    def wait(self, timeout: float) -> None:
        """Wait for burst workers to exit; kill stragglers; raise if any failed."""
        for proc in self.processes:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.check()

    def finish(self) -> None:
        """Stop every worker with SIGTERM; raise if any did not exit cleanly."""
        self.stop()
        for proc, log in zip(self.processes, self.logs, strict=True):
            # -SIGTERM: the signal came before the worker installed its handler, the first thing
            # importing fairq does (it was still starting Python on a loaded machine, after the
            # other workers had run every job): it never touched the store, so nothing is lost.
            if proc.returncode not in (0, -signal.SIGTERM):
                raise WorkerFailed(
                    f"worker pid {proc.pid} exited with {proc.returncode} on SIGTERM:\n{_tail(log)}"
                )

    def check(self) -> None:
        for proc, log in zip(self.processes, self.logs, strict=True):
            code = proc.poll()
            if code not in (None, 0):
                raise WorkerFailed(f"worker pid {proc.pid} exited with {code}:\n{_tail(log)}")

    def stop(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def worker_command(
    app_ref: str, url: str, queues: str, concurrency: int, *, burst: bool = False
) -> list[str]:
    command = [
        sys.executable, "-m", "fairq", "--log-level", "warning",
        "worker", app_ref, "--url", url, "--queues", queues,
        "--concurrency", str(concurrency),
    ]  # fmt: skip
    return [*command, "--burst"] if burst else command


def start_workers(
    count: int,
    app_ref: str,
    url: str,
    queues: str,
    concurrency: int,
    log_dir: Path,
    *,
    burst: bool = False,
) -> WorkerGroup:
    """``burst``: each exits once nothing is ready or scheduled (then ``wait`` for them)."""
    env = {**os.environ, "FAIRQ_URL": url}
    processes, logs = [], []
    for i in range(count):
        log = log_dir / f"worker-{queues}-{i + 1}.log"
        with log.open("wb") as out:
            processes.append(
                subprocess.Popen(
                    worker_command(app_ref, url, queues, concurrency, burst=burst),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        logs.append(log)
    return WorkerGroup(processes, logs)


def _tail(log: Path, lines: int = 20) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
