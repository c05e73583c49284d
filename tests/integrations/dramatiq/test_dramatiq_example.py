"""examples/dramatiq runs as its README says: plain workers, a relay, the flood, fairq stats."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import BROKER_URL, HERE, Harness, wait_for

from fairq import App

EXAMPLE = HERE.parents[2] / "examples" / "dramatiq"


@pytest.mark.parametrize("kind", ["sqlite"])
def test_the_example_project_runs_its_flood_through_the_relay(harness: Harness) -> None:
    env = harness.env()
    env.update(
        FAIRQ_URL=harness.store_url,
        DRAMATIQ_BROKER_URL=BROKER_URL,
        DRAMATIQ_NAMESPACE=harness.namespace,
    )
    argv = ["-m", "dramatiq", "tasks:broker", "--processes", "1", "--threads", "2"]
    harness.start("worker", [*argv, "--path", str(EXAMPLE)], env, cwd=EXAMPLE)
    harness.start("relay", ["-m", "fairq", "relay", "tasks:fair", "--in-flight", "2"], env, EXAMPLE)
    sent = subprocess.run(
        [sys.executable, "tasks.py"], cwd=EXAMPLE, env=env, capture_output=True, text=True
    )
    assert sent.returncode == 0, sent.stderr
    assert "sent 202 jobs" in sent.stdout

    app = App(harness.store_url)
    try:
        wait_for(lambda: sum(s.succeeded for s in app.stats("imports")) == 202, "202 imports done")
        tenants = {s.tenant: s.succeeded for s in app.stats("imports")}
        assert tenants == {"big-corp": 200, "small-shop": 1, "tiny-startup": 1}
    finally:
        app.close()
    stats = subprocess.run(
        [sys.executable, "-m", "fairq", "stats", "--queue", "imports", "--url", harness.store_url],
        env=env,
        capture_output=True,
        text=True,
    )
    assert stats.returncode == 0, stats.stderr
    assert "small-shop" in stats.stdout and "big-corp" in stats.stdout
