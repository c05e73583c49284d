"""The job of benchmarks/redis_latency.py: records how long after its enqueue it started."""

from __future__ import annotations

import os
import time

import redis

from fairq import App

URL = (
    os.environ.get("FAIRQ_BENCH_REDIS_URL")
    or os.environ.get("BENCH_REDIS_URL")  # its old name, read until the next release
    or "redis://127.0.0.1:6379/13"
)
LATENCIES = "bench:latency"

app = App(f"{URL}?prefix=latency")
_client = redis.Redis.from_url(URL)


@app.job(name="stamp", tenant="tenant")
def stamp(tenant: str, enqueued: float) -> None:
    _client.rpush(LATENCIES, repr(time.time() - enqueued))
