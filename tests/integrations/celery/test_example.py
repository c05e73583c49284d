"""examples/celery as its README runs it: a worker and a relay started in its directory, a
``.delay()`` from a producer, and ``fairq stats`` showing the relayed queue."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import ROOT, Setup, wait_done

pytestmark = pytest.mark.processes
EXAMPLE = ROOT / "examples" / "celery"


def load_example(monkeypatch: pytest.MonkeyPatch, setup: Setup) -> ModuleType:
    """The example's tasks module, imported here as a producer would (under its own name)."""
    monkeypatch.setenv("FAIRQ_URL", setup.url)
    monkeypatch.setenv("CELERY_BROKER_URL", setup.broker)
    spec = importlib.util.spec_from_file_location("example_celery_tasks", EXAMPLE / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_project_runs_as_its_readme_says(
    sqlite_setup: Setup, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    setup = sqlite_setup
    tasks = load_example(monkeypatch, setup)
    queue = setup.queue
    ids = [tasks.build_report.apply_async((a, "weekly"), queue=queue).id for a in ("a1", "a2")]
    worker = setup._start(
        "example-worker",
        [
            sys.executable, "-m", "celery", "-A", "tasks", "worker", "--queues", queue,
            "--concurrency", "2", "--prefetch-multiplier", "1", "--without-gossip",
            "--without-mingle", "--without-heartbeat", "--hostname", f"ex-{queue}@%h",
            "--loglevel", "INFO",
        ],
        cwd=EXAMPLE,
    )  # fmt: skip
    worker.wait_log("ready.")
    relay = setup._start(
        "example-relay",
        [
            sys.executable,
            "-m",
            "fairq",
            "relay",
            "tasks:fair",
            "--queue",
            queue,
            "--in-flight",
            "2",
        ],
        cwd=EXAMPLE,
    )
    relay.wait_log("releasing queues")
    wait_done(tasks.fair.app, ids)
    worker.wait_log("a2/weekly: 4950")
    tasks.fair.app.close()
    stats = subprocess.run(
        [sys.executable, "-m", "fairq", "stats", "--url", setup.url, "--json"],
        check=True, capture_output=True, text=True, cwd=EXAMPLE,
    )  # fmt: skip
    assert queue in json.dumps(json.loads(stats.stdout))
