"""Limits and throttling, seen through ``fairq stats``: one tenant of each kind, for real.

    python examples/limits_demo.py                      # a fresh SQLite file in a temp dir
    python examples/limits_demo.py sqlite:///demo.db    # (the file is emptied first)
    python examples/limits_demo.py memory://            # one process, the reference model

What it sets up on queue ``default`` (served 6:3 with ``default_throttled``), with a worker of
three slots whose jobs hold their slot until the demo has printed the stats:

* ``capped``      max_running 1, three jobs: one runs, two wait   -> capped (1/1 running)
* ``ratelimited`` 1 job a minute, three jobs: one ran just now     -> rate-limited (… at T)
* ``throttled``   its job sends a tenant's 4th+ enqueue in an hour to default_throttled;
  it enqueues six                                                    -> throttled (6 in last 1h > 3)
* ``paused``      weight 0, two jobs                               -> paused (weight 0)
* ``smallco``     one job, enqueued once every slot is busy        -> waiting its turn

Every job is a real enqueue, every start a real dequeue by a real worker; on SQLite the stats
are printed by the real ``fairq stats`` command in another process.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import fairq
from fairq.cli.admin._common import out_console
from fairq.cli.admin.stats import queue_reports, render_queue
from fairq.worker import Worker

HOLD = threading.Event()  # jobs keep their slot until this is set (in-process worker)
HOLD_LIMIT = 60.0


def build(url: str) -> fairq.App:
    app = fairq.App(url)
    app.queue("default", weight=6)
    app.queue("default_throttled", weight=3)

    @app.job(
        name="sync",
        tenant="tenant",
        throttle=[fairq.Throttle(threshold=3, per=3600, queue="default_throttled")],
    )
    def sync(tenant: str, n: int) -> None:
        HOLD.wait(HOLD_LIMIT)

    return app


def main(url: str) -> None:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    app = build(url)
    sync = app.jobs["sync"]
    app.set_tenant("default", "capped", max_running=1)
    app.set_tenant("default", "ratelimited", rate="1/minute")
    app.set_tenant("default", "paused", weight=0)
    for tenant, count in (("capped", 3), ("ratelimited", 3), ("throttled", 6), ("paused", 2)):
        for n in range(count):
            sync.enqueue(tenant, n)
    worker = Worker(app, concurrency=3, grace_period=5.0)
    with worker.in_thread():
        _wait(lambda: sum(r.running for r in app.stats()) == 3, "three jobs running")
        sync.enqueue("smallco", 0)  # every slot is busy: it waits its turn
        if url.startswith("sqlite:"):
            command = [sys.executable, "-m", "fairq", "stats", "--url", url]
            subprocess.run(command, check=True)
        else:
            for report in queue_reports(app, None, None, time.time()):
                out_console().print(render_queue(report))
        HOLD.set()
    app.close()


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


if __name__ == "__main__":
    default = f"sqlite:///{tempfile.gettempdir()}/fairq_limits_demo.db"
    main(sys.argv[1] if len(sys.argv) > 1 else default)
