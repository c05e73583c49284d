"""Jobs for the Redis process tests: ``python -m fairq worker tests.redis.redis_apps:app``.

The store is ``$FAIRQ_TEST_URL``. Jobs leave a file per run under ``workdir``, so a test sees
what ran, and where, without timing anything. Leases are short so a lost one comes back soon.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from fairq import App

JOB_DEADLINE = 60.0


def make_app(url: str) -> App:
    app = App(url)

    @app.job(name="touch", tenant="tenant", lease=2.0, max_attempts=10)
    def touch(tenant: str, workdir: str, tag: str) -> None:
        folder = Path(workdir) / "done"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / tag).write_text(str(os.getpid()))

    @app.job(name="hang_once", tenant="tenant", lease=1.0)
    def hang_once(tenant: str, workdir: str, tag: str) -> None:
        """The first run hangs until its worker is killed; a later run finishes."""
        started = Path(workdir) / "started"
        started.mkdir(parents=True, exist_ok=True)
        try:
            (started / tag).open("x").write(str(os.getpid()))
        except FileExistsError:
            touch(tenant, workdir, tag)
            return
        deadline = time.monotonic() + JOB_DEADLINE
        while time.monotonic() < deadline:
            time.sleep(0.01)
        raise TimeoutError("the kill never came")

    return app


app = make_app(os.environ.get("FAIRQ_TEST_URL", "memory://"))
