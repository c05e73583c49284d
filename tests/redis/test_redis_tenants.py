"""Tenant ids are interned per queue: any string round-trips exactly, and names are cached
safely (ids are never reused); a lease token is routed to its queue even after an id is reused.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from redis_helpers import new_job

from fairq.backends.redis import RedisBackend
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    HeartbeatParams,
    MaintainParams,
    StatsParams,
)

ALPHABET = ":{}[]*?\\\"' \t\n%_-ü\u0308日本🚀\x01\x7f" + "abc"  # NUL: refused everywhere


def random_tenants(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    found: set[str] = set()
    while len(found) < count:
        size = rng.choice([1, 2, 3, 8, 40, 300])
        found.add("".join(rng.choice(ALPHABET) for _ in range(size)))
    return sorted(found)


def test_random_tenant_ids_round_trip_through_stats_and_leases(backend: RedisBackend) -> None:
    tenants = random_tenants(300)
    jobs = [new_job(n, t) for n, t in enumerate(tenants)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    assert [row.tenant for row in backend.stats(StatsParams())] == tenants
    leases = backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=0.0, limit=400)
    ).leases
    assert sorted(lease.tenant for lease in leases) == tenants
    assert {lease.job_id: lease.tenant for lease in leases} == {j.id: j.tenant for j in jobs}
    for tenant in tenants[:20]:
        (row,) = backend.stats(StatsParams(tenant=tenant))
        assert (row.tenant, row.running) == (tenant, 1)


def test_a_token_is_routed_to_the_queue_that_holds_its_job_now(
    make_backend: Callable[..., RedisBackend],
) -> None:
    first, second = make_backend(), make_backend()
    first.enqueue(EnqueueParams(jobs=[new_job(0, queue="a")], now=0.0))
    (old,) = first.dequeue(DequeueParams(queues=["a"], worker_id="w", now=0.0)).leases
    first.ack_many(AckManyParams(tokens=[old.token], now=1.0))
    first.maintain(MaintainParams(now=100.0, retention=1.0))  # j0 is pruned: its id is free
    second.enqueue(EnqueueParams(jobs=[new_job(0, queue="b")], now=100.0))
    (new,) = second.dequeue(DequeueParams(queues=["b"], worker_id="w", now=100.0)).leases
    assert new.token == old.token  # same id, same attempt: first still routes it to "a"
    first.ack_many(AckManyParams(tokens=[new.token], now=101.0))
    (info,) = second.get_jobs(GetJobsParams(ids=["j0"]))
    assert (info.queue, info.state.value) == ("b", "succeeded")


def test_a_queue_named_twice_in_a_dequeue_is_served_as_once(backend: RedisBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(n, f"t{n % 2}") for n in range(4)], now=0.0))
    params = DequeueParams(queues=["default", "default"], worker_id="w", now=0.0, limit=4)
    leases = backend.dequeue(params).leases
    assert [lease.job_id for lease in leases] == ["j0", "j1", "j2", "j3"]
    (row0,) = backend.stats(StatsParams(tenant="t0"))
    assert (row0.ready, row0.running) == (0, 2)


def test_a_route_found_by_a_lookup_is_corrected_after_the_id_is_reused(
    make_backend: Callable[..., RedisBackend],
) -> None:
    """A peer's worker learns a relayed job's queue by looking it up at its claim (it did not
    dequeue it) and keeps it for the ack: a stale one is found out as a dequeued one is."""
    relay, worker = make_backend(), make_backend()
    relay.enqueue(EnqueueParams(jobs=[new_job(0, queue="a")], now=0.0))
    (old,) = relay.dequeue(DequeueParams(queues=["a"], worker_id="r", now=0.0, hold=5.0)).leases
    claimed = worker.heartbeat(HeartbeatParams(tokens=[old.token], now=1.0, claim=True))
    assert old.token in claimed.deadlines  # looked up: "a", kept
    assert worker.ack_many(AckManyParams(tokens=[old.token], now=2.0)).lost == []
    relay.maintain(MaintainParams(now=100.0, retention=1.0))  # j0 is pruned: its id is free
    relay.enqueue(EnqueueParams(jobs=[new_job(0, queue="b")], now=100.0))
    (new,) = relay.dequeue(DequeueParams(queues=["b"], worker_id="r", now=100.0, hold=5.0)).leases
    assert new.token == old.token  # same id, same attempt: the worker still routes it to "a"
    claimed = worker.heartbeat(HeartbeatParams(tokens=[new.token], now=101.0, claim=True))
    assert new.token in claimed.deadlines and not claimed.lost
    assert worker.ack_many(AckManyParams(tokens=[new.token], now=102.0)).lost == []
    (info,) = relay.get_jobs(GetJobsParams(ids=["j0"]))
    assert (info.queue, info.state.value) == ("b", "succeeded")
