"""fairq's job for benchmarks/redis_fairness.py: ``fairq worker fairness_jobs:app``.

Like every peer's, it records its start (one RPUSH) and then sleeps 5 ms.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from _drive import URL, counter
from _flood import run_job

from fairq import App

app = App(os.environ.get("BENCH_FAIRQ_URL", f"{URL}?prefix=fairq"))
_client = counter()


@app.job(name="stamp", tenant="tenant", lease=60.0)
def stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)
