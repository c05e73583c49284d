"""A sharded app for ``fairq worker --shards`` tests: ``tests.worker.shard_app:app``."""

from __future__ import annotations

from fairq import App

app = App("memory://")
app.queue("imports", shards=8, shard_size=2)


@app.job(name="work", queue="imports", tenant="tenant")
def work(tenant: str, n: int) -> None:
    return None
