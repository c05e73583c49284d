"""The shards of sharded queues, side by side: each shard's load, and a tenant's shards.

A shard is a queue of its own in the store (``imports@3``, fairq.policy.shards), so each has
its own table in ``fairq stats`` and on the dashboard; this adds the view across them: which
shard is busy and which idle (the trade-off of sharding, docs/sharding.md), and where a tenant's
jobs are. Built from the queue reports, so it costs no read of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fairq.policy.shards import split_shard
from fairq.reports.queues import QueueReport


@dataclass
class ShardedQueue:
    """A sharded queue's shards that hold anything, in shard order, as plain JSON-ready rows."""

    queue: str
    shards: list[dict[str, Any]] = field(default_factory=list)
    assigned: list[str] | None = None  # a tenant's shards, by the App's declaration, if known


def in_queue(name: str, queue: str) -> bool:
    """Whether queue ``name`` is ``queue`` or one of its shards (``--queue imports``)."""
    shard = split_shard(name)
    return name == queue or (shard is not None and shard[0] == queue)


def sharded_queues(reports: Sequence[QueueReport], tenant: str | None = None) -> list[ShardedQueue]:
    """Per sharded queue, each shard's tenants, ready, running and oldest wait (and, with
    ``tenant``, that tenant's own ready and running there); only shards the reports hold."""
    found: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for report in reports:
        shard = split_shard(report.queue)
        if shard is None:
            continue
        base, index = shard
        row: dict[str, Any] = {
            "shard": report.queue,
            "index": index,
            "tenants": report.totals.get("tenants", 0),
            "ready": report.totals.get("ready", 0),
            "running": report.totals.get("running", 0),
            "oldest_ready_age": report.totals.get("oldest_ready_age"),
        }
        if tenant is not None:
            own = [r for r in report.tenants if r["tenant"] == tenant]
            row["tenant_ready"] = sum(r["ready"] for r in own)
            row["tenant_running"] = sum(r["running"] for r in own)
        found.setdefault(base, []).append((index, row))
    return [
        ShardedQueue(queue=base, shards=[row for _, row in sorted(rows, key=lambda p: p[0])])
        for base, rows in sorted(found.items())
    ]
