"""The real demo, end to end and reduced: real worker processes, a real SQLite file.

The only timing claim is the comparison of the two modes within the same run: the small
tenants wait less, and Jain's index is higher, under fair scheduling than under FIFO.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DEADLINE = 60.0  # only so a process that outlives its group's kill fails the test


def run_in_own_group(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a session (process group) of its own and, however it ends (a
    timeout, a crash), kill what is left of the group: the demo's ``fairq worker`` processes
    are in it, and would otherwise outlive a demo killed at the timeout."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the group is gone: all ended
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


@pytest.mark.processes
def test_fair_scheduling_beats_fifo_for_small_tenants() -> None:
    command = [sys.executable, "-m", "fairq", "demo", "--jobs", "300", "--small", "3", "--json"]
    done = run_in_own_group(command, timeout=240)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    fifo, fair = result["modes"]["fifo"], result["modes"]["fair"]
    assert set(fifo["tenants"]) == {"greedy", "small-1", "small-2", "small-3"}
    assert fifo["small"]["jobs"] == fair["small"]["jobs"] == 15
    assert fifo["tenants"]["greedy"]["jobs"] == fair["tenants"]["greedy"]["jobs"] == 300
    assert fair["small"]["p99"] < fifo["small"]["p99"]
    assert fair["jain_index"] > 0.9 > fifo["jain_index"]  # over the rest of the flood
    assert result["small_p99_speedup"] > 1


def alive(pid: int) -> bool:
    """Running (not ended, nor a zombie waiting for its parent to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.processes
def test_a_run_that_ends_without_stopping_its_children_leaves_none_behind() -> None:
    """As a demo that crashed (or was killed at the timeout) leaves its workers running: a
    command starts a child that would run ten minutes and exits at once."""
    child = [sys.executable, "-c", "import time; time.sleep(600)"]
    quiet = "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL"  # as the demo's log to files
    starts = f"import subprocess; print(subprocess.Popen({child!r}, {quiet}).pid)"
    done = run_in_own_group([sys.executable, "-c", starts], timeout=DEADLINE)
    pid = int(done.stdout)
    deadline = time.monotonic() + DEADLINE
    while alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"the command's child {pid} outlived its group's kill")
        time.sleep(0.01)
