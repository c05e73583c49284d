"""The jobs of benchmarks/weights_at_slots.py: ``fairq worker weights_jobs:app``.

Each sleeps the seconds it is given: a job whose real length the benchmark chose. The worker's
store is ``$BENCH_FAIRQ_URL``.
"""

from __future__ import annotations

import os
import time

from fairq import App


def declare(app: App) -> None:
    @app.job(name="work", queue="weights", tenant="tenant", lease=120.0)
    def work(tenant: str, seconds: float) -> None:
        time.sleep(seconds)

    @app.job(name="work_fixed", queue="weights", tenant="tenant", lease=120.0, learn_cost=False)
    def work_fixed(tenant: str, seconds: float) -> None:
        """The same, charged the default 1 s at every dispatch: the scheduler before learned
        costs."""
        time.sleep(seconds)


app = App(os.environ.get("BENCH_FAIRQ_URL", "memory://"))
declare(app)
