"""Rates, pauses, history and heartbeat charging: Lua keeps the model's doubles bit for bit,
and the per-queue limited zset orders ties exactly as the model's (limited_until, tenant)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.records import JobRecord, TenantRecord
from fairq.contract import (
    AckManyParams,
    Backend,
    DequeueParams,
    EnqueueParams,
    HeartbeatParams,
    MaintainParams,
    QueueSettings,
    ReleaseParams,
    SetQueueParams,
    StatsParams,
    TenantSettingsParams,
)
from fairq.job import NewJob
from fairq.model import ReferenceModel
from fairq.policy.rate import Rate

COSTS = [0.1, 0.7, 1.0 / 3.0, 2.5e-7, 3.3]


def _job(n: int, tenant: str, run_at: float = 0.0) -> NewJob:
    return NewJob(id=f"j{n}", name="t", queue="q", tenant=tenant, payload="{}", run_at=run_at,
                  max_attempts=5, lease_timeout=4.0, cost=COSTS[n % len(COSTS)])  # fmt: skip


def _scenario(backend: Backend) -> list[Any]:
    """Rates (queue default and own, with bursts), a half-life with a small max_debt, a pause,
    heartbeats past the estimate, releases, idle returns and scheduled jobs."""
    seen: list[Any] = []
    queue = QueueSettings(queue="q", rate=Rate(3, 2.0, 2), half_life=7.0, max_debt=0.4)
    backend.set_queue(SetQueueParams(settings=queue, now=0.0))
    backend.enqueue(EnqueueParams(jobs=[_job(n, "abcd"[n % 4], 0.37 * n) for n in range(40)],
                                  now=0.05))  # fmt: skip
    backend.set_tenant(TenantSettingsParams(queue="q", tenant="a", now=0.1, rate=Rate(7, 10.0, 3)))
    backend.set_tenant(TenantSettingsParams(queue="q", tenant="b", now=0.1, weight=0.7))
    now, held = 0.1, []
    for step in range(90):
        now += 0.13 * (step % 5) + 1e-9
        if step == 20:
            backend.set_tenant(TenantSettingsParams(queue="q", tenant="c", now=now, weight=0.0))
        if step == 45:
            backend.set_tenant(TenantSettingsParams(queue="q", tenant="c", now=now, weight=None))
            backend.set_queue(SetQueueParams(settings=QueueSettings(queue="q", rate=Rate(
                5, 1.0, 1), half_life=3.0), now=now))  # fmt: skip
        if step == 60:
            backend.enqueue(EnqueueParams(jobs=[_job(100 + n, "d") for n in range(5)], now=now))
        leases = backend.dequeue(
            DequeueParams(queues=["q"], worker_id="w", now=now, limit=2)
        ).leases
        seen.append([(x.token, x.tenant, x.started_at) for x in leases])
        held += leases
        if step % 3 == 0 and held:
            seen.append(backend.heartbeat(HeartbeatParams(tokens=[x.token for x in held],
                                                          now=now)))  # fmt: skip
        if step % 4 == 1 and held:
            backend.ack_many(AckManyParams(tokens=[held.pop(0).token], now=now))
        if step % 11 == 5 and held:
            backend.release(ReleaseParams(token=held.pop().token, now=now))
        seen.append(backend.maintain(MaintainParams(now=now)))
        seen.append(backend.stats(StatsParams(now=now + 0.5)))
    return seen


def test_rates_history_pauses_and_heartbeats_match_the_model_exactly(
    backend: RedisBackend,
) -> None:
    model = ReferenceModel()
    assert _scenario(backend) == _scenario(model)
    queue = model._queues["q"]
    key = backend.layout.queue_key
    tids = backend.client.hgetall(key("q", "tids"))
    for name, tid in tids.items():
        record = TenantRecord.parse(backend.client.hget(key("q", "tenants"), tid))
        tenant = queue.tenants[name.decode()]
        stored = (record.finish, record.start, record.tat, record.limited_until, record.usage,
                  record.usage_at)  # fmt: skip
        assert stored == (tenant.finish, tenant.start, tenant.tat, tenant.limited_until,
                          tenant.usage, tenant.usage_at)  # fmt: skip
    for job_id, raw in backend.client.hgetall(key("q", "jobs")).items():
        stored_job = JobRecord.parse(raw)
        job = model._jobs[job_id.decode()]
        assert (stored_job.leases, stored_job.charged, stored_job.ready_at) == (
            job.leases, job.charged, job.ready_at)  # fmt: skip


def test_a_released_job_gets_a_new_token(backend: RedisBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[_job(0, "a")], now=0.0))
    (first,) = backend.dequeue(DequeueParams(queues=["q"], worker_id="w", now=1.0)).leases
    backend.release(ReleaseParams(token=first.token, now=1.5))
    (second,) = backend.dequeue(DequeueParams(queues=["q"], worker_id="w", now=2.0)).leases
    assert (first.attempt, second.attempt) == (1, 1)
    assert first.token != second.token
    assert backend.heartbeat(HeartbeatParams(tokens=[first.token], now=2.1)).lost == [first.token]


# Tenant names for the tie order: code points on both sides of the UTF-16 surrogate range, so a
# UTF-16 (JavaScript-like) order would differ from code point order; no lone surrogates (they
# cannot be sent to Redis as UTF-8 at all).
# NUL is refused on every store (PostgreSQL cannot keep it): the lowest code point is 1
NAMES = st.text(st.characters(blacklist_categories=["Cs"], min_codepoint=1), min_size=1, max_size=6)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(NAMES, min_size=2, max_size=8, unique=True))
def test_limited_ties_order_by_tenant_code_points(names: list[str], backend: RedisBackend) -> None:
    """Every tenant is held until the same instant: the zset order must be sorted(names)."""
    backend.client.flushdb()
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue="q", rate=Rate(1, 10.0)),
                                     now=0.0))  # fmt: skip
    jobs = [_job(n, name) for n, name in enumerate(names * 2)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    leases = backend.dequeue(DequeueParams(queues=["q"], worker_id="w", now=0.0, limit=99)).leases
    assert len(leases) == len(names)
    members = backend.client.zrange(backend.layout.queue_key("q", "limited"), 0, -1,
                                    withscores=True)  # fmt: skip
    assert [(score, m.decode()) for m, score in members] == sorted((10.0, n) for n in names)


@pytest.mark.parametrize("seed", range(3))
def test_ties_in_limited_until_readmit_in_the_models_order(
    seed: int, backend: RedisBackend
) -> None:
    names = [*["é", "e", "\U0001f680", "\uffff", "a b", "A", "\x01x"][seed:], "z"]
    model = ReferenceModel()
    for store in (backend, model):
        settings = QueueSettings(queue="q", rate=Rate(1, 5.0))
        store.set_queue(SetQueueParams(settings=settings, now=0.0))
        store.enqueue(EnqueueParams(jobs=[_job(n, m) for n, m in enumerate(names * 2)], now=0.0))
        store.dequeue(DequeueParams(queues=["q"], worker_id="w", now=0.0, limit=99))
    got = backend.dequeue(DequeueParams(queues=["q"], worker_id="w", now=5.0, limit=99)).leases
    want = model.dequeue(DequeueParams(queues=["q"], worker_id="w", now=5.0, limit=99)).leases
    assert [x.tenant for x in got] == [x.tenant for x in want]


def test_a_tighter_queue_rate_holds_an_idle_tenant_whose_tat_is_ahead(
    backend: RedisBackend,
) -> None:
    """set_queue resettles tenants with tat > now even with nothing ready (the tats zset)."""
    loose = QueueSettings(queue="q", rate=Rate(1, 10.0, burst=3))
    tight = QueueSettings(queue="q", rate=Rate(1, 10.0))
    model = ReferenceModel()
    for store in (backend, model):
        store.set_queue(SetQueueParams(settings=loose, now=0.0))
        store.enqueue(EnqueueParams(jobs=[_job(0, "a")], now=0.0))
        store.dequeue(DequeueParams(queues=["q"], worker_id="w", now=0.0))
        store.set_queue(SetQueueParams(settings=tight, now=1.0))
    (row,) = backend.stats(StatsParams(now=1.0))
    assert row.limited_until == 10.0 and row.ready == 0
    assert backend.stats(StatsParams(now=1.0)) == model.stats(StatsParams(now=1.0))
    assert backend.maintain(MaintainParams(now=2.0)) == model.maintain(MaintainParams(now=2.0))
