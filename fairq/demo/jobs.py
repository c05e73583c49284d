"""The demo's job functions, declared on an App that worker processes can import.

Workers run ``fairq worker fairq.demo.jobs:app --url URL``; ``app`` reads its store from
``$FAIRQ_URL`` like any App, and the demo process builds its own with ``make_app(url)``, so
both sides declare exactly the same jobs.
"""

from __future__ import annotations

import time

from fairq.app import App

WORK = "fairq.demo.work"
NOOP = "fairq.demo.noop"
NOOP_ASYNC = "fairq.demo.noop_async"


def work(customer: str, seconds: float) -> None:
    """A short job done for ``customer`` (its tenant, unless the demo overrides it for FIFO)."""
    time.sleep(seconds)


def noop() -> None:
    """Nothing at all: what the throughput benchmark measures is the queue, not the job."""


async def noop_async() -> None:
    """``noop`` as a coroutine: what the worker's event loop costs per job."""


def make_app(url: str | None = None) -> App:
    app = App(url)
    app.job(work, name=WORK, queue="demo", tenant="customer", lease=30.0, cost=0.005)
    app.job(noop, name=NOOP, queue="bench", lease=30.0, cost=0.001)
    app.job(noop_async, name=NOOP_ASYNC, queue="bench", lease=30.0, cost=0.001)
    return app


app = make_app()
