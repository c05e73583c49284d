"""``--processes N``: N worker processes under one parent that keeps them running.

Each child is ``python -m fairq worker …`` with the same options (minus ``--processes``), in a
session of its own, so a Ctrl-C in the terminal reaches the parent only and each child sees a
signal exactly once, forwarded. A child that dies unexpectedly is started again after a back-off
(0.5 s doubling to 30 s, reset once it has run a minute). Children watch the parent's pid and
stop gracefully if it disappears (SIGKILL), so no worker is ever orphaned.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType

from fairq.startup import StartupSignals

log = logging.getLogger("fairq.worker")

FIRST_RESTART_DELAY = 0.5
MAX_RESTART_DELAY = 30.0
HEALTHY_AFTER = 60.0  # a child that ran this long starts its back-off afresh when it dies
PARENT_CHECK_INTERVAL = 1.0
# Exit codes of a clean stop: 0, or killed by the forwarded signal itself, which happens only
# while a child's Python is still starting, before it imports fairq (fairq/startup.py).
CLEAN_EXITS = {0, -signal.SIGTERM, -signal.SIGINT}


@dataclass
class _Child:
    """One of the N places for a worker process."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0  # unexpected exits in a row
    restart_at: float | None = None
    finished: bool = False  # exited for good (burst done, or stopped)


class Supervisor:
    """Runs ``command`` ``processes`` times; ``run()`` returns the exit code for the parent."""

    def __init__(self, command: Sequence[str], processes: int, *, burst: bool) -> None:
        self.command = list(command)
        self.burst = burst
        self.children = [_Child(i) for i in range(processes)]
        self._stopping = False
        self._clean = True
        self._wake_r, self._wake_w = os.pipe()

    def run(self, startup: StartupSignals | None = None) -> int:
        """``startup``: the stop signals caught while the process started (checked once this
        one's handlers are in place, so none is missed): with one, no child is started."""
        signums = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
        previous = {signum: signal.signal(signum, self._on_signal) for signum in signums}
        try:
            if startup is not None and startup.received:
                log.info(
                    "%s received while starting: no worker process started", startup.received[0]
                )
                return 0
            for child in self.children:
                self._spawn(child)
            while not all(child.finished for child in self.children):
                self._wait_for_event()
                self._reap()
                self._restart_due()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
            os.close(self._wake_r)
            os.close(self._wake_w)
        log.info("all worker processes have exited")
        return 0 if self._clean else 1

    # -- events ---------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        os.write(self._wake_w, bytes([signum]))  # only a write: it may interrupt anything

    def _wait_for_event(self) -> None:
        due = [c.restart_at for c in self.children if c.restart_at is not None]
        timeout = max(min(due) - time.monotonic(), 0.0) if due else None
        readable, _, _ = select.select([self._wake_r], [], [], timeout)
        if readable:
            for signum in os.read(self._wake_r, 64):
                if signum != signal.SIGCHLD:
                    self._forward(signal.Signals(signum))

    def _forward(self, signum: signal.Signals) -> None:
        if not self._stopping:
            log.info("%s received: stopping %d worker process(es)", signum.name, self._alive())
        self._stopping = True
        for child in self.children:
            child.restart_at = None
            if child.process is not None:
                child.process.send_signal(signum)
            else:
                child.finished = True

    # -- children -------------------------------------------------------------------------

    def _spawn(self, child: _Child) -> None:
        child.process = subprocess.Popen(self.command, start_new_session=True)
        child.started = time.monotonic()
        child.restart_at = None
        log.info("worker process %d started (pid %d)", child.index, child.process.pid)

    def _reap(self) -> None:
        for child in self.children:
            if child.process is None or (code := child.process.poll()) is None:
                continue
            pid, child.process = child.process.pid, None
            if self._stopping or (self.burst and code == 0):
                child.finished = True
                self._clean = self._clean and code in CLEAN_EXITS
                log.info("worker process %d (pid %d) exited with code %d", child.index, pid, code)
            else:
                self._schedule_restart(child, pid, code)

    def _schedule_restart(self, child: _Child, pid: int, code: int) -> None:
        now = time.monotonic()
        child.failures = 1 if now - child.started >= HEALTHY_AFTER else child.failures + 1
        delay = min(FIRST_RESTART_DELAY * 2 ** (child.failures - 1), MAX_RESTART_DELAY)
        child.restart_at = now + delay
        log.warning(
            "worker process %d (pid %d) exited unexpectedly with code %d; restarting in %.1f s",
            child.index,
            pid,
            code,
            delay,
            extra={"action": "child_restart", "pid": pid, "exit_code": code},
        )

    def _restart_due(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is not None and child.restart_at <= now and not self._stopping:
                self._spawn(child)

    def _alive(self) -> int:
        return sum(1 for child in self.children if child.process is not None)


def watch_parent(pid: int, on_gone: Callable[[], None]) -> None:
    """Call ``on_gone`` (once) when process ``pid`` is no longer this process's parent."""

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(PARENT_CHECK_INTERVAL)
        log.warning("the supervising process %d is gone; stopping", pid)
        on_gone()

    threading.Thread(target=watch, name="fairq-parent-watch", daemon=True).start()
