"""A forgotten tenant leaves nothing behind: every hash field and zset/set member it had in its
queue's keys is deleted when pruning its last stored job forgets it (issue 3: an idle tenant's
state costs O(1) memory and expires)."""

from __future__ import annotations

import redis
from redis_helpers import new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.keys import PART_TYPES, QUEUE_PARTS
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    MaintainParams,
    QueueSettings,
    SetQueueParams,
    StatsParams,
)
from fairq.policy.rate import Rate

SIZE = {"hash": "HLEN", "zset": "ZCARD", "set": "SCARD"}
#: Per-queue bookkeeping, not per-tenant: meta holds V and the tenant id counter, wake tokens,
#: and the learned costs, one field per job name.
NOT_PER_TENANT = {"meta", "wake", "costs"}


def sizes(raw: redis.Redis, backend: RedisBackend) -> dict[str, int]:
    """Fields or members of every per-tenant structure of queue "default", and the directory."""
    found = {"dir": int(raw.hlen(backend.layout.directory))}
    for part in QUEUE_PARTS:
        if part not in NOT_PER_TENANT:
            key = backend.layout.queue_key("default", part)
            found[part] = int(raw.execute_command(SIZE[PART_TYPES[part]], key))
    return found


def run(backend: RedisBackend, n: int, now: float) -> None:
    """Dispatch tenant b's next job at ``now`` and ack it a second later."""
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases
    assert lease.job_id == f"j{n}"
    backend.ack_many(AckManyParams(tokens=[lease.token], now=now + 1.0))


def test_a_forgotten_tenant_leaves_no_field_or_member(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    limit = Rate(1, 10.0)  # b gets a tat, and a rate hold after each start
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue="default", rate=limit), now=0))
    backend.enqueue(EnqueueParams(jobs=[new_job(0, "a", queue="other")], now=0.0))
    before = sizes(raw, backend)
    backend.enqueue(EnqueueParams(jobs=[new_job(1, "b"), new_job(2, "b")], now=0.0))
    run(backend, 1, 0.0)
    run(backend, 2, 10.0)  # tat 20: b is held until 20, with nothing left to run
    held = sizes(raw, backend)
    assert (held["tenants"], held["tids"], held["tnames"]) == (1, 1, 1)
    assert (held["tats"], held["limited"], held["done"], held["jobs"]) == (1, 1, 2, 2)
    # prune only ("other" is maintained): b's hold is over but not yet ended when it goes
    params = MaintainParams(now=100.0, queues=["other"], retention=10.0)
    assert backend.maintain(params).pruned == 2
    assert sizes(raw, backend) == before
    assert backend.stats(StatsParams(queue="default")) == []
