"""Throttle windows in Redis: one list per (job name, tenant) in its home queue's slot, bounded
by the window size, expiring with the span, and never naming the tenant in a key."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis
from redis_helpers import keys_of, new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.keys import key_slot
from fairq.contract import (
    EnqueueParams,
    GetJobsParams,
    JobType,
    PublishJobTypesParams,
    ThrottleWindowsParams,
)
from fairq.errors import DuplicateJob
from fairq.job import NewJob
from fairq.model import ReferenceModel
from fairq.policy.throttle import Throttle

RULES = (Throttle(2, 60.0, "slow"), Throttle(4, 10.0, "slower"))


def _job(n: int, tenant: str, rules: tuple[Throttle, ...] = RULES) -> NewJob:
    return replace(new_job(n, tenant), throttle=rules)


def test_a_window_keeps_only_window_size_times_and_expires_with_its_span(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    for n in range(20):
        backend.enqueue(EnqueueParams(jobs=[_job(n, "a")], now=float(n)))
    key = backend.layout.window_key("default", "task", "a")
    assert raw.llen(key) == 5  # max threshold + 1
    assert 59_000 < raw.pttl(key) <= 60_000
    assert key_slot(key) == key_slot("default")


def test_tenants_never_reach_window_key_names(backend: RedisBackend, raw: redis.Redis) -> None:
    tenants = ["evil}:{slow}:jobs", "x" * 1000, "ünï 🚀", "a:b"]
    backend.enqueue(EnqueueParams(jobs=[_job(n, t) for n, t in enumerate(tenants)], now=0.0))
    names = b" ".join(keys_of(raw, backend.layout.prefix))
    assert b"evil" not in names and b"xxxx" not in names and "ü".encode() not in names
    found = backend.throttle_windows(
        ThrottleWindowsParams(keys=[("task", t) for t in tenants], now=1.0)
    )
    assert found == {("task", t): [0.0] for t in tenants}


def test_routing_agrees_with_the_model_in_mixed_batches_and_when_time_goes_back(
    backend: RedisBackend,
) -> None:
    model = ReferenceModel()
    steps = [0.0, 1.0, 1.0, 2.5, 9.0, 3.0, 64.0, 75.0, 76.0, 70.0, 200.0, 200.0, 200.0]
    for store in (backend, model):
        n = 0
        for now in steps:
            batch = [_job(n, "a"), _job(n + 1, "b"), new_job(n + 2, "a"), _job(n + 3, "a")]
            n += 4
            assert store.enqueue(EnqueueParams(jobs=batch, now=now)).queues is not None
    keys = [("task", "a"), ("task", "b"), ("task", "c")]
    for now in (200.0, 230.0, 261.0):
        params = ThrottleWindowsParams(keys=keys, now=now)
        assert backend.throttle_windows(params) == model.throttle_windows(params)
    for n in range(len(steps) * 4):
        assert backend.get_jobs(GetJobsParams(ids=[f"j{n}"])) == model.get_jobs(
            GetJobsParams(ids=[f"j{n}"])
        )


def test_a_duplicate_id_records_nothing(backend: RedisBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[_job(0, "a")], now=0.0))
    with pytest.raises(DuplicateJob):
        backend.enqueue(EnqueueParams(jobs=[_job(1, "a"), _job(0, "a")], now=1.0))
    found = backend.throttle_windows(ThrottleWindowsParams(keys=[("task", "a")], now=1.0))
    assert found == {("task", "a"): [0.0]}


def test_job_types_keep_their_rules(backend: RedisBackend) -> None:
    typed = JobType(name="t", queue="default", tenant_arg="tenant", params=("tenant",),
                    max_attempts=3, lease_timeout=30.0, cost=1.0, throttle=RULES)  # fmt: skip
    backend.publish_job_types(
        PublishJobTypesParams(types=[typed, replace(typed, name="u", throttle=())])
    )
    assert backend.job_types() == {"t": typed, "u": replace(typed, name="u", throttle=())}
