"""A small run of benchmarks/chaos.py on every store: real worker processes SIGKILLed mid-run.

The figures that are invariants, not speeds, are asserted: nothing lost, the cap held, every
expired lease logged, every worker still running at the end exits 0 on SIGTERM. The full-size
run and its figures are in docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REDIS = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
POSTGRES = os.environ.get("FAIRQ_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _url(kind: str) -> list[str]:
    name = f"chaos{uuid.uuid4().hex[:8]}"
    if kind == "redis":
        return ["--url", f"{REDIS}?prefix={name}"]
    if kind == "postgres":
        return ["--url", f"{POSTGRES}?schema={name}"]
    return []  # a temp SQLite file


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
def test_workers_killed_mid_run_lose_nothing_and_hold_the_cap(kind: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "chaos.py"), *_url(kind),
         "--jobs", "1500", "--kills", "4", "--processes", "3", "--lease", "2",
         "--timeout", "200", "--json"],
        capture_output=True, text=True, timeout=260, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert not figures["timed_out"]
    assert figures["lost"] == 0 and figures["never_started"] == 0
    assert figures["succeeded"] == figures["enqueued"]
    assert figures["over_cap"] <= figures["cap"]
    assert figures["kills"] == 4
    assert figures["lease_expired_warnings"] == figures["expired_attempts"] > 0
    assert figures["term_ok"] and set(figures["sigterm_exit_codes"]) == {0}
