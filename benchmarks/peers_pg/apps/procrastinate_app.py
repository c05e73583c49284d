"""procrastinate: an App with one no-op task, run by ``procrastinate worker``."""

from __future__ import annotations

import os

import procrastinate

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=os.environ["BENCH_DSN"]))


@app.task(name="noop")
async def noop(n: int) -> None:
    """Does nothing."""
