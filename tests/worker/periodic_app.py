"""A periodic job every second, for ``fairq worker tests.worker.periodic_app:app``.

The store is ``$FAIRQ_TEST_URL``; each run leaves a file under ``$FAIRQ_TEST_WORKDIR/runs``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from fairq import App

app = App(os.environ.get("FAIRQ_TEST_URL", "memory://"))


@app.periodic("* * * * * *", tenant="acme")
@app.job(name="tick")
def tick() -> None:
    runs = Path(os.environ["FAIRQ_TEST_WORKDIR"]) / "runs"
    runs.mkdir(exist_ok=True)
    (runs / uuid.uuid4().hex).write_text(str(os.getpid()))
