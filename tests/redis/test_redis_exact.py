"""Lua computes the very doubles Python does: tags, times and learned costs agree with the model
bit for bit."""

from __future__ import annotations

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.records import TenantRecord
from fairq.contract import (
    AckManyParams,
    Backend,
    DequeueParams,
    EnqueueParams,
    FailParams,
    JobCostsParams,
    StatsParams,
    TenantSettingsParams,
)
from fairq.errors import LeaseExpired
from fairq.job import NewJob
from fairq.model import ReferenceModel

COSTS = [0.1, 0.7, 1.0 / 3.0, 2.5e-7, 12345.678901234]
WEIGHTS = {"a": 3.0, "b": 0.1, "c": 7.0 / 9.0}


def _run(backend: Backend) -> list[tuple[str, float, float, float]]:
    jobs = [
        NewJob(id=f"j{n}", name="t", queue="q", tenant=t, payload="{}", run_at=0.1 * n,
               max_attempts=5, lease_timeout=0.3, cost=COSTS[n % len(COSTS)])
        for n, t in enumerate("abcabcabcabcabc")
    ]  # fmt: skip
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.1))
    for tenant, weight in WEIGHTS.items():
        backend.set_tenant(TenantSettingsParams(queue="q", tenant=tenant, now=0.1, weight=weight))
    now, taken = 0.1, []
    for step in range(40):
        now += 0.1 * (step % 3) + 1e-9
        for lease in backend.dequeue(DequeueParams(queues=["q"], worker_id="w", now=now)).leases:
            taken.append((lease.job_id, lease.started_at, lease.deadline, lease.cost))
            end = now + 0.123456789 * (step % 4)
            try:
                if step % 5 == 0:
                    backend.fail(FailParams(token=lease.token, now=end, error="e", retry_at=end))
                elif step % 7 != 0:
                    backend.ack_many(AckManyParams(tokens=[lease.token], now=end))
            except LeaseExpired:
                taken.append((lease.job_id, -1.0, end, 0.0))
    return taken


def test_tags_clock_and_times_match_the_model_exactly(backend: RedisBackend) -> None:
    model = ReferenceModel()
    assert _run(backend) == _run(model)
    queue = model._queues["q"]
    stored = backend.client.hget(backend.layout.queue_key("q", "meta"), "V")
    assert float(stored) == queue.vclock
    tids = backend.client.hgetall(backend.layout.queue_key("q", "tids"))
    for name, tid in tids.items():
        raw = backend.client.hget(backend.layout.queue_key("q", "tenants"), tid)
        record = TenantRecord.parse(raw)
        tenant = queue.tenants[name.decode()]
        assert (record.finish, record.start) == (tenant.finish, tenant.start)
    assert backend.stats(StatsParams()) == model.stats(StatsParams())
    assert backend.job_costs(JobCostsParams()) == model.job_costs(JobCostsParams())
