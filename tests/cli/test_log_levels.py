"""``--log-level debug`` is fairq's debug lines, not redis-py's (or any other library's):
``--library-log-level`` asks for theirs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid

import pytest

from fairq import App
from fairq.demo.jobs import NOOP, make_app

pytestmark = pytest.mark.processes

RECORD = re.compile(r"^\S+ \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+) ")
REDIS_URL = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")


def burst_worker(url: str, *levels: str) -> list[str]:
    """Run one job in a burst worker; the log lines' "LEVEL logger" pairs."""
    app: App = make_app(url)
    app.jobs[NOOP].options(tenant="t").enqueue()
    app.close()
    command = [sys.executable, "-m", "fairq", *levels, "worker", "fairq.demo.jobs:app", "--burst"]
    done = subprocess.run(
        [*command, "--url", url], capture_output=True, text=True, timeout=120, check=True
    )
    found = (RECORD.match(line) for line in done.stderr.splitlines())
    return [f"{m[1]} {m[2]}" for m in found if m]


def test_debug_is_fairqs_own_lines_only() -> None:
    lines = burst_worker(f"{REDIS_URL}?prefix=l{uuid.uuid4().hex[:8]}", "--log-level", "debug")
    assert "DEBUG fairq.worker" in lines  # the job's line
    assert [line for line in lines if not line.split()[1].startswith("fairq")] == []


def test_library_log_level_asks_for_the_libraries_lines() -> None:
    url = f"{REDIS_URL}?prefix=l{uuid.uuid4().hex[:8]}"
    lines = burst_worker(url, "--log-level", "warning", "--library-log-level", "debug")
    assert "DEBUG redis.connection" in lines
    assert [line for line in lines if line.split()[1].startswith("fairq")] == []
