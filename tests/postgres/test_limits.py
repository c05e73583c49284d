"""Rate limits, history and throttling where PostgreSQL differs from Python or needs its own
guarantees: float underflow, tie order of rate limits, window storage, enqueues in the
application's transaction."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import psycopg
import pytest

from fairq.backends.postgres.sql import quote_ident
from fairq.contract import (
    AckManyParams,
    Backend,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    JobType,
    MaintainParams,
    PublishJobTypesParams,
    QueueSettings,
    ReleaseParams,
    SetQueueParams,
    StatsParams,
    TenantSettingsParams,
    ThrottleWindowsParams,
)
from fairq.job import NewJob
from fairq.model import ReferenceModel
from fairq.policy import history
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .helpers import Q, new_job

RULES = (Throttle(2, 60.0, "slow"),)


def sql_decayed(pg: DisposableBackend, usage: float, since: float, now: float, hl: float) -> float:
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        row = conn.execute(
            f"SELECT {quote_ident(pg.schema)}.decayed(%s, %s, %s, %s)", (usage, since, now, hl)
        ).fetchone()
    assert row is not None
    return float(row[0])


def test_the_sql_decay_gives_pythons_doubles_even_where_postgres_would_raise_underflow(
    pg: DisposableBackend,
) -> None:
    rng = random.Random(5)
    cases = [
        (0.0, 0.0, 1.7e9, 60.0),  # the first event on a real clock: exponent ~ 2.8e7
        (1.0, 0.0, 1074.5, 1.0),  # 0.5 ** 1074.5: the smallest subnormal, not 0
        (1.0, 0.0, 1075.0, 1.0),  # rounds to 0
        (0.001, 0.0, 1070.0, 1.0),  # the product underflows: PostgreSQL raises, Python gives 0
        (3.5, 10.0, 10.0, 60.0),  # no time passed
        (3.5, 10.0, 5.0, 60.0),  # time went back: unchanged
    ]
    cases += [
        (rng.uniform(0, 100), 0.0, rng.uniform(0, 5000), rng.choice([1.0, 7.5, 60.0]))
        for _ in range(200)
    ]
    for usage, since, now, hl in cases:
        expected = history.decayed(usage, since, now, hl)
        got = sql_decayed(pg, usage, since, now, hl)
        assert got == expected and math.copysign(1, got) == math.copysign(1, expected), (
            usage,
            since,
            now,
            hl,
        )


def test_history_on_a_real_clock_matches_the_model(pg: DisposableBackend) -> None:
    """Times near the epoch's present: the decay since usage_at = 0 underflows to 0."""
    spec = ReferenceModel()
    settings = QueueSettings(queue=Q, half_life=1.0, rate=Rate(5, 1.0, burst=2))
    t0 = 1.7e9
    for store in (spec, pg):
        store.set_queue(SetQueueParams(settings=settings, now=t0))

    def step(store: Backend, k: int) -> object:
        now = t0 + 1100.0 * k + 0.25
        store.enqueue(EnqueueParams(jobs=[new_job(2 * k), new_job(2 * k + 1, "b")], now=now))
        leases = store.dequeue(DequeueParams(queues=[Q], worker_id="w", now=now, limit=2)).leases
        for lease in leases:
            store.ack_many(AckManyParams(tokens=[lease.token], now=now + 0.75))
        return [lease.token for lease in leases], store.stats(StatsParams(now=now + 2000))

    for k in range(6):
        assert step(pg, k) == step(spec, k)


def test_rate_limits_end_in_limited_until_then_code_point_order(pg: DisposableBackend) -> None:
    tenants = ["ｚ", "😀", "é", "a", "Z", "zz", "z"]
    pg.set_queue(SetQueueParams(settings=QueueSettings(queue=Q, rate=Rate(1, 10.0)), now=0.0))
    pg.enqueue(EnqueueParams(jobs=[new_job(n, t) for n, t in enumerate(tenants)], now=0.0))
    assert len(pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=0.0, limit=10)).leases) == 7
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as conn:
        conn.execute(f"UPDATE {quote_ident(pg.schema)}.tenants SET limited_until = 5.0")
        conn.execute(
            f"UPDATE {quote_ident(pg.schema)}.tenants SET limited_until = 4.0 WHERE tenant = 'zz'"
        )
        rows = conn.execute(pg.q["tenants_limited_due"], {"queue": Q, "now": 6.0}).fetchall()
        names = {
            row[0]: row[1]
            for row in conn.execute(f"SELECT id, tenant FROM {quote_ident(pg.schema)}.tenants")
        }
    assert [names[row[0]] for row in rows] == ["zz", *sorted(set(tenants) - {"zz"})]


def test_a_window_stores_at_most_threshold_plus_one_times_and_is_pruned(
    pg: DisposableBackend,
) -> None:
    jobs = [replace(new_job(n), throttle=RULES) for n in range(10)]
    queues = pg.enqueue(EnqueueParams(jobs=jobs, now=100.0)).queues
    assert queues == [Q, Q] + ["slow"] * 8
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        stored = conn.execute(
            f"SELECT times, expires_at FROM {quote_ident(pg.schema)}.throttle_windows"
        ).fetchall()
    assert stored == [([100.0, 100.0, 100.0], 160.0)]
    pg.maintain(MaintainParams(now=160.0))  # the last time is still inside the span
    assert pg.throttle_windows(ThrottleWindowsParams(keys=[("task", "a")], now=160.0)) == {
        ("task", "a"): [100.0, 100.0, 100.0]
    }
    pg.maintain(MaintainParams(now=160.5))
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        left = conn.execute(f"SELECT count(*) FROM {quote_ident(pg.schema)}.throttle_windows")
        assert left.fetchone() == (0,)
    assert pg.enqueue(
        EnqueueParams(jobs=[replace(new_job(10), throttle=RULES)], now=161.0)
    ).queues == [Q]


def test_an_enqueue_in_the_callers_transaction_is_routed_and_counted_only_if_it_commits(
    pg: DisposableBackend,
) -> None:
    def throttled(n: int) -> list[NewJob]:
        return [replace(new_job(n), throttle=RULES)]

    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        with conn.transaction(force_rollback=True):
            for n in range(5):
                pg.enqueue_in(conn, EnqueueParams(jobs=throttled(n), now=1.0))
        window = pg.throttle_windows(ThrottleWindowsParams(keys=[("task", "a")], now=1.0))
        assert window == {("task", "a"): []}
        with conn.transaction():
            routed = [
                pg.enqueue_in(conn, EnqueueParams(jobs=throttled(n), now=1.0)) for n in range(5, 8)
            ]
        with pg.bound_to(conn), conn.transaction():
            routed.append(pg.enqueue(EnqueueParams(jobs=throttled(8), now=1.0)).queues)
    assert routed == [[Q], [Q], ["slow"], ["slow"]]
    taken = pg.dequeue(DequeueParams(queues=["slow"], worker_id="w", now=2.0, limit=5)).leases
    assert [lease.job_id for lease in taken] == ["j7", "j8"]
    assert [job.queue for job in pg.get_jobs(GetJobsParams(ids=["j5", "j7"]))] == [Q, "slow"]


def test_a_paused_tenant_keeps_its_jobs_and_is_not_served(pg: DisposableBackend) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(0), new_job(1, "b")], now=0.0))
    pg.set_tenant(TenantSettingsParams(queue=Q, tenant="a", now=0.0, weight=0.0))
    (lease,) = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=1.0, limit=5)).leases
    assert lease.tenant == "b"
    pg.set_tenant(TenantSettingsParams(queue=Q, tenant="a", now=2.0, weight=None))
    (lease,) = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=2.0, limit=5)).leases
    assert lease.tenant == "a"


@pytest.mark.parametrize("now", [0.0, 1.7e9])
def test_a_handed_back_job_gets_a_new_token(pg: DisposableBackend, now: float) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(0)], now=now))
    (first,) = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=now)).leases
    pg.release(ReleaseParams(token=first.token, now=now + 1))
    (second,) = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=now + 2)).leases
    assert (first.token, second.token, second.attempt) == ("j0:1", "j0:2", 1)
    assert pg.ack_many(AckManyParams(tokens=[first.token], now=now + 3)).lost == [first.token]
    assert pg.ack_many(AckManyParams(tokens=[second.token], now=now + 3)).acked == [second.token]


def test_published_job_types_carry_their_throttle_rules_and_learn_cost(
    pg: DisposableBackend,
) -> None:
    rules = (Throttle(10, 3600.0, "slow"), Throttle(100, 60.5, "slower"))
    types = [
        JobType(name="sync", queue=Q, tenant_arg="shop", params=("shop",), max_attempts=3,
                lease_timeout=30.0, cost=1.0, throttle=rules),
        JobType(name="plain", queue=Q, tenant_arg=None, max_attempts=1, lease_timeout=5.0,
                cost=2.0, learn_cost=False),
    ]  # fmt: skip
    pg.publish_job_types(PublishJobTypesParams(types=types))
    assert pg.job_types() == {t.name: t for t in types}
