"""The job ``benchmarks/redis_cluster.py`` drains: ``fairq worker redis_cluster_jobs:app``.

It does nothing (what fairq itself costs is measured); completions are read from fairq's own
counters. The store is ``$BENCH_FAIRQ_URL``: one Redis or a Redis Cluster (``?cluster=1``).
"""

from __future__ import annotations

import os

from fairq import App


def make_app(url: str) -> App:
    made = App(url)

    @made.job(name="empty", tenant="tenant", lease=60.0)
    def empty(tenant: str) -> None:
        """Nothing at all."""

    return made


app = make_app(os.environ.get("BENCH_FAIRQ_URL", "redis://127.0.0.1:6379/13?prefix=fq"))
