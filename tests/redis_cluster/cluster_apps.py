"""The app of the failover test: ``python -m fairq worker tests.redis_cluster.cluster_apps:app``.

The store is ``$FAIRQ_TEST_URL``. Each run of ``touch`` appends its tag to ``runs.log`` in
``workdir`` (one ``os.write`` on an ``O_APPEND`` descriptor: lines never interleave and survive
a kill), so a test counts the runs of every job without timing anything.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from fairq import App


def make_app(url: str) -> App:
    app = App(url)

    @app.job(name="touch", tenant="tenant", lease=2.0, max_attempts=100)
    def touch(tenant: str, workdir: str, tag: str, millis: float) -> None:
        time.sleep(millis / 1000)
        descriptor = os.open(Path(workdir) / "runs.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(descriptor, f"{tag}\n".encode())
        finally:
            os.close(descriptor)

    return app


def runs(workdir: Path) -> list[str]:
    log = workdir / "runs.log"
    return log.read_text().split() if log.exists() else []


app = make_app(os.environ.get("FAIRQ_TEST_URL", "memory://"))
