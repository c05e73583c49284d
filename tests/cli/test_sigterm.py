"""SIGTERM at any moment of a long-running command's start exits 0: ``fairq worker`` (one
process or several), ``fairq relay`` and ``fairq dashboard``, each sent SIGTERM while Python
imports fairq (``-X importtime`` shows the import of fairq.errors: long before the command's
own code runs), as soon as the process catches it (its handler is in place, as
/proc/PID/status shows), after its first line of output, and once it is serving
(fairq/startup.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairq import App

pytestmark = pytest.mark.processes

DEADLINE = 60.0  # only so a broken command fails the test instead of hanging it
BROKER_URL = os.environ.get("FAIRQ_TEST_BROKER_URL", "redis://127.0.0.1:6379/10")
RELAY_SOURCE = """\
import os

from redis import Redis

from fairq.integrations.rq import FairRQ

fair = FairRQ(Redis.from_url(os.environ["BROKER_URL"]))


@fair.task(queue="reports", tenant="account")
def build(account: str) -> None:
    pass
"""


@dataclass(frozen=True)
class Command:
    args: list[str]
    ready: str  # what it prints once it serves


COMMANDS = {
    "worker": Command(["worker", "fairq.demo.jobs:app"], "started: store"),
    "worker --processes 2": Command(
        ["worker", "fairq.demo.jobs:app", "--processes", "2"], "started: store"
    ),
    "relay": Command(["relay", "relay_source:fair"], "releasing queues"),
    "dashboard": Command(["dashboard", "--port", "0"], "fairq dashboard on http://"),
}


def catches_sigterm(pid: int) -> bool:
    """The process has a handler for SIGTERM (Python has none of its own)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def wait_until(condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the command exited ({process.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    app = App(f"sqlite:///{tmp_path / 'fairq.db'}")
    app.publish()  # the dashboard reads an existing store
    app.close()
    (tmp_path / "relay_source.py").write_text(RELAY_SOURCE)
    yield tmp_path


def output(path: Path) -> list[str]:
    """The command's lines, without ``-X importtime``'s."""
    lines = path.read_text(errors="replace").splitlines(keepends=True)
    return [line for line in lines if not line.startswith("import time:")]


def start(
    command: Command, workdir: Path, log_path: Path, *, sigint_ignored: bool = False
) -> subprocess.Popen[bytes]:
    """``python -X importtime -m fairq …``; ``sigint_ignored``: started as a shell without job
    control starts a background job (``fairq worker &`` in a script), SIGINT ignored."""
    env = {**os.environ, "FAIRQ_URL": f"sqlite:///{workdir / 'fairq.db'}"}
    env["BROKER_URL"] = BROKER_URL
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "fairq", *command.args],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=ignore,
        )  # fmt: skip


@pytest.mark.parametrize("moment", ["importing fairq", "caught", "first line", "ready"])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_sigterm_at_any_moment_of_start_up_exits_0(workdir: Path, name: str, moment: str) -> None:
    command = COMMANDS[name]
    log_path = workdir / "out.log"
    process = start(command, workdir, log_path)
    try:
        if moment == "importing fairq":
            wait_until(lambda: " fairq.errors\n" in log_path.read_text(), moment, process)
        elif moment == "caught":
            wait_until(lambda: catches_sigterm(process.pid), "its SIGTERM handler", process)
        elif moment == "first line":
            wait_until(lambda: any(x.endswith("\n") for x in output(log_path)), moment, process)
        else:
            wait_until(lambda: command.ready in "".join(output(log_path)), command.ready, process)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=DEADLINE)
        shown = "".join(output(log_path))
        assert code == 0, f"exit code {code}; output:\n{shown}"
        assert "Traceback" not in shown
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_sigterm_while_importing_fairq_exits_0_with_sigint_ignored(
    workdir: Path, name: str
) -> None:
    """A background job of a shell without job control starts with SIGINT ignored: SIGTERM
    is still caught first thing (and SIGINT left ignored), so the command stops cleanly."""
    command = COMMANDS[name]
    log_path = workdir / "out.log"
    process = start(command, workdir, log_path, sigint_ignored=True)
    try:
        wait_until(lambda: " fairq.errors\n" in log_path.read_text(), "importing fairq", process)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=DEADLINE)
        shown = "".join(output(log_path))
        assert code == 0, f"exit code {code}; output:\n{shown}"
        assert "Traceback" not in shown
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_short_command_gives_the_signal_back_to_python(workdir: Path) -> None:
    """``fairq stats`` handles no stop signal: one caught while it started ends it as Python's
    own handling would (not swallowed, not exit 0)."""
    log_path = workdir / "out.log"
    env = {**os.environ, "FAIRQ_URL": f"sqlite:///{workdir / 'fairq.db'}"}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "fairq", "stats"],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    wait_until(lambda: " fairq.errors\n" in log_path.read_text(), "importing fairq", process)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=DEADLINE) == -signal.SIGTERM
    assert output(log_path) == []  # it did nothing
