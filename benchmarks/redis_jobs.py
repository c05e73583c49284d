"""fairq's no-op job for the Redis benchmarks: ``fairq worker redis_jobs:app`` (cwd benchmarks/).

Like every peer's job it does one ``INCR`` so completion is counted the same way for all;
``empty`` does nothing (its completions are read from fairq's own counters).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from _drive import URL, counter, mark_done

from fairq import App

app = App(os.environ.get("BENCH_FAIRQ_URL", f"{URL}?prefix=fairq"))
_client = counter()


@app.job(name="noop", tenant="tenant", lease=60.0)
def noop(tenant: str) -> None:
    mark_done(_client)


@app.job(name="empty", tenant="tenant", lease=60.0)
def empty(tenant: str) -> None:
    """Nothing at all, for ``redis_drain_cost.py --job empty``: what fairq itself costs."""
