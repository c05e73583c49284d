"""``share`` in `fairq stats` and the dashboard: each tenant's part of the queue's recent
worker-seconds (fairq.reports.verdicts), whatever the weights."""

from __future__ import annotations

import pytest

from fairq.contract import AckManyParams, DequeueParams, EnqueueParams, TenantSettingsParams
from fairq.job import NewJob
from fairq.model import ReferenceModel
from fairq.reports.queues import queue_reports


def job(n: int, tenant: str) -> NewJob:
    return NewJob(
        id=f"j{n}", name="task", queue="q", tenant=tenant, payload="{}", run_at=0.0,
        max_attempts=3, lease_timeout=60.0, cost=1.0,
    )  # fmt: skip


def test_a_tenant_that_held_every_worker_shows_about_all_of_the_share() -> None:
    """A paying tenant (weight 1000) keeps 8 slots busy for 60 s with 10 ms jobs; a small one
    (weight 1) ran 2 s of work. In worker-seconds that is 480 to 2: the share says 99.6 %.
    (In virtual seconds — worker time over weight, what the share used to be — it was 0.48 to
    2, and the tenant holding every worker showed 26 %.)"""
    store = ReferenceModel()
    store.set_tenant(TenantSettingsParams(queue="q", tenant="big", now=0.0, weight=1000.0))
    store.enqueue(EnqueueParams(jobs=[job(0, "small")], now=0.0))
    (small,) = store.dequeue(DequeueParams(queues=["q"], worker_id="w", now=0.0)).leases
    store.ack_many(AckManyParams(tokens=[small.token], now=2.0))
    store.enqueue(EnqueueParams(jobs=[job(n, "big") for n in range(1, 48_001)], now=0.0))
    now = 0.0
    while now < 60.0:
        leases = store.dequeue(DequeueParams(queues=["q"], worker_id="w", now=now, limit=8))
        now = round(now + 0.01, 2)
        store.ack_many(AckManyParams(tokens=[x.token for x in leases.leases], now=now))
    (report,) = queue_reports(store, [], "q", None, now)
    share = {row["tenant"]: row["share"] for row in report.tenants}
    assert share["big"] == pytest.approx(0.996, abs=0.002)
    assert share["small"] == pytest.approx(0.004, abs=0.002)
