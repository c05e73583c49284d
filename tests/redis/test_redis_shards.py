"""A sharded queue's shards on Redis: their keys share the queue's hash tag (one Cluster slot),
so one enqueue.lua call can choose among a tenant's shards; they never clash with the queue's."""

from __future__ import annotations

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.keys import QUEUE_PARTS, Layout, key_slot
from fairq.contract import EnqueueParams
from fairq.job import NewJob


def test_every_shard_of_a_queue_is_in_its_slot() -> None:
    layout = Layout("fq")
    slot = key_slot(layout.queue_key("imports", "meta"))
    for index in (0, 1, 7, 1023):
        shard = f"imports@{index}"
        keys = layout.queue_keys(shard)
        assert {key_slot(key) for key in keys} == {slot}
        assert keys[0] == f"fq:{{imports}}@{index}:meta"
        assert not set(keys) & set(layout.queue_keys("imports"))
    assert len({layout.queue_key(f"imports@{i}", QUEUE_PARTS[0]) for i in range(8)}) == 8


def test_only_the_shard_chosen_becomes_a_queue_seen(backend: RedisBackend) -> None:
    job = NewJob(
        id="j1", name="task", queue="imports@0", tenant="a", payload="{}", run_at=0.0,
        max_attempts=1, lease_timeout=30.0, cost=1.0, shards=("imports@0", "imports@1"),
    )  # fmt: skip
    assert backend.enqueue(EnqueueParams(jobs=[job], now=0.0)).queues == ["imports@0"]
    seen = backend.client.smembers(backend.layout.queues)
    assert {name.decode() for name in seen} == {"imports@0"}
