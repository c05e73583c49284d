"""fairq: a no-op job whose tenant is an argument (fairness on: the scheduler orders tenants)."""

from __future__ import annotations

import os

from fairq.app import App

app = App(os.environ["FAIRQ_URL"])


@app.job(name="noop", tenant="tenant")
def noop(tenant: str, n: int) -> None:
    """Does nothing: the benchmark measures the queue, not the job."""
