"""Key layout: a queue's keys share one Cluster slot; tenants never appear in key names."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis
from redis_helpers import keys_of, new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.keys import (
    FIGURES_TTL,
    QUEUE_PARTS,
    REPLY_PART,
    Layout,
    check_prefix,
    key_slot,
)
from fairq.contract import (
    DequeueParams,
    EnqueueParams,
    FailParams,
    GetJobsParams,
    MaintainParams,
    QueueSettings,
    SetQueueParams,
    TenantSettingsParams,
)
from fairq.errors import ConfigError


def test_key_slots_match_redis_cluster() -> None:
    assert key_slot("123456789") == 0x31C3 % 16384  # the CRC16/XMODEM check value
    assert key_slot("foo") == 12182  # values from the Redis Cluster specification
    assert key_slot("{user1000}.following") == key_slot("{user1000}.followers")
    assert key_slot("foo{}{bar}") == key_slot(b"foo{}{bar}")
    assert key_slot("foo{{bar}}zap") == key_slot("{bar")


def test_every_key_of_a_queue_is_in_the_queues_slot(
    backend: RedisBackend, raw: redis.Redis, prefix: str
) -> None:
    jobs = [new_job(n, t, queue=q) for n, (t, q) in enumerate(
        [("a", "default"), ("b{x}", "default"), ("a", "reports.v2"), ("}{", "x-y_z")]
    )]  # fmt: skip
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    for queue in ("default", "reports.v2", "x-y_z"):
        settings = QueueSettings(queue=queue, max_running=3)
        backend.set_queue(SetQueueParams(settings=settings, now=0.0))
        leases = backend.dequeue(DequeueParams(queues=[queue], worker_id="w", now=1.0)).leases
        backend.fail(FailParams(token=leases[0].token, now=2.0, error="e", retry_at=None))
    layout = Layout(prefix)
    for queue in ("default", "reports.v2", "x-y_z"):
        slots = {key_slot(key) for key in layout.queue_keys(queue)}
        assert slots == {key_slot(queue)}
        stored = [
            k for k in keys_of(raw, prefix) if k.startswith(f"{prefix}:{{{queue}}}:".encode())
        ]
        assert stored and {key_slot(k) for k in stored} == {key_slot(queue)}
    expected = {layout.directory, layout.queues} | {
        layout.queue_key(q, p) for q in ("default", "reports.v2", "x-y_z") for p in QUEUE_PARTS
    }
    # The calls' remembered replies: one key per caller (this thread) and queue, expiring.
    replies = {k.decode() for k in keys_of(raw, prefix) if f"}}:{REPLY_PART}:".encode() in k}
    assert len(replies) == 3 and all(raw.pttl(k) > 0 for k in replies)
    # The figures of the slot the calls ran in (slot 0 of the virtual clock), expiring.
    figures = {layout.figures_key(q, 0) for q in ("default", "reports.v2", "x-y_z")}
    assert all(0 < raw.pttl(k) <= FIGURES_TTL * 1000 for k in figures)
    assert {k.decode() for k in keys_of(raw, prefix)} - replies <= expected | figures


def test_tenant_ids_never_reach_key_names(
    backend: RedisBackend, raw: redis.Redis, prefix: str
) -> None:
    tenants = ["evil}:{default}:jobs", "*", "x" * 10_000, "ünï 🚀"]
    backend.enqueue(EnqueueParams(jobs=[new_job(n, t) for n, t in enumerate(tenants)], now=0.0))
    for tenant in tenants:
        backend.set_tenant(TenantSettingsParams(queue="default", tenant=tenant, now=0.0, weight=2))
    backend.maintain(MaintainParams(now=1.0))
    names = b" ".join(keys_of(raw, prefix))
    assert b"evil" not in names and b"xxxx" not in names and "ü".encode() not in names
    assert len(keys_of(raw, prefix)) <= 3 + len(QUEUE_PARTS) + 1  # + the enqueue's reply


@pytest.mark.parametrize("bad", ["", "a{b", "a}b"])
def test_a_prefix_that_would_break_the_hash_tag_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        check_prefix(bad)


def test_two_prefixes_share_a_database_without_seeing_each_other(
    make_backend: Callable[..., RedisBackend],
) -> None:
    one, two = make_backend(prefix="one"), make_backend(prefix="two")
    one.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    two.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))  # the same id: no clash
    assert len(one.dequeue(DequeueParams(queues=["default"], worker_id="w", now=0.0)).leases) == 1
    assert two.get_jobs(GetJobsParams(ids=["j0"]))[0].state.value == "ready"
