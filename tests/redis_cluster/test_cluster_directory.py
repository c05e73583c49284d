"""Job ids on a Redis Cluster: unique across every master, found by id wherever their queue
lives (directory.py), released when a store fails or a job is pruned; the functions library
comes back on a master that lost it; ``wait_replicas`` waits for a replica."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
import redis

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.cluster import NotReplicated
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    GetJobsParams,
    MaintainParams,
    RequeueParams,
)
from fairq.errors import DuplicateJob, SchemaError
from fairq.job import JobState, Unique
from fairq.policy.throttle import Throttle

from .helpers import QUEUES, master_index, new_job
from .servers import LocalCluster

Q0, Q1, Q2 = QUEUES[:3]  # on three masters


def ids(backend: RedisBackend, asked: list[str]) -> list[tuple[str, str]]:
    return [(j.id, j.queue) for j in backend.get_jobs(GetJobsParams(ids=asked))]


def test_an_id_stored_on_one_master_is_refused_on_another(backend: RedisBackend) -> None:
    assert master_index(Q0) != master_index(Q1)
    backend.enqueue(EnqueueParams(jobs=[new_job(1, queue=Q0)], now=0.0))
    batch = [new_job(2, queue=Q2), new_job(1, queue=Q1), new_job(3, queue=Q1)]
    with pytest.raises(DuplicateJob, match="j1"):
        backend.enqueue(EnqueueParams(jobs=batch, now=0.0))
    assert ids(backend, ["j1", "j2", "j3"]) == [("j1", Q0)]
    # the batch's other ids were released: they can be used
    backend.enqueue(EnqueueParams(jobs=[new_job(2, queue=Q1), new_job(3, queue=Q2)], now=0.0))
    assert ids(backend, ["j3", "j1", "j2"]) == [("j3", Q2), ("j1", Q0), ("j2", Q1)]


def test_a_failed_store_releases_its_ids(backend: RedisBackend, prefix: str) -> None:
    backend.client.set(f"{prefix}:{{{Q2}}}:ready", "not a zset")  # another app's key
    batch = [new_job(1, queue=Q0), new_job(2, queue=Q2)]
    with pytest.raises(SchemaError):
        backend.enqueue(EnqueueParams(jobs=batch, now=0.0))
    assert backend.client.get(f"{prefix}:{{{Q2}}}:ready") == b"not a zset"
    assert ids(backend, ["j1", "j2"]) == []
    backend.client.delete(f"{prefix}:{{{Q2}}}:ready")
    fresh = RedisBackend.from_url(backend.options.safe_url)  # its key checks not yet done
    try:
        fresh.enqueue(EnqueueParams(jobs=batch, now=0.0))
        assert ids(fresh, ["j1", "j2"]) == [("j1", Q0), ("j2", Q2)]
    finally:
        fresh.close()


def test_a_pruned_jobs_id_is_free_again(backend: RedisBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(1, queue=Q0)], now=0.0))
    (lease,) = backend.dequeue(DequeueParams(queues=[Q0], worker_id="w", now=1.0)).leases
    backend.ack_many(AckManyParams(tokens=[lease.token], now=2.0))
    assert backend.maintain(MaintainParams(now=10.0, retention=1.0)).pruned == 1
    assert ids(backend, ["j1"]) == []
    backend.enqueue(EnqueueParams(jobs=[new_job(1, queue=Q1)], now=11.0))
    assert ids(backend, ["j1"]) == [("j1", Q1)]


def test_jobs_are_found_and_requeued_across_masters(backend: RedisBackend) -> None:
    jobs = [replace(new_job(n, queue=q), max_attempts=1) for n, q in enumerate(QUEUES)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    leases = backend.dequeue(
        DequeueParams(queues=QUEUES, worker_id="w", now=1.0, limit=len(QUEUES))
    ).leases
    assert len(leases) == len(QUEUES)
    for lease in leases:
        backend.fail(FailParams(token=lease.token, now=2.0, error="boom", retry_at=None))
    asked = [f"j{n}" for n in reversed(range(len(QUEUES)))]
    found = backend.get_jobs(GetJobsParams(ids=[*asked, "nope"]))
    assert [(j.id, j.queue, j.state) for j in found] == [
        (f"j{n}", QUEUES[n], JobState.DEAD) for n in reversed(range(len(QUEUES)))
    ]
    assert backend.requeue(RequeueParams(ids=[*asked, "nope"], now=3.0)) == len(QUEUES)
    assert {j.state for j in backend.get_jobs(GetJobsParams(ids=asked))} == {JobState.READY}


def test_a_job_whose_queue_is_chosen_at_enqueue_is_found_there(backend: RedisBackend) -> None:
    """A sharded job (its shards share a slot) and a throttled one (re-routed to a queue on
    another master): the directory names every queue it may be in, the one holding it wins."""
    sharded = replace(new_job(1, queue="imp@0"), shards=("imp@0", "imp@1"))
    throttled = [replace(new_job(n, queue=Q0), throttle=(Throttle(1, 60.0, Q1),)) for n in (2, 3)]
    assert master_index(Q0) != master_index(Q1)
    chosen = backend.enqueue(EnqueueParams(jobs=[sharded, *throttled], now=0.0)).queues
    assert chosen == ["imp@0", Q0, Q1]
    assert ids(backend, ["j1", "j2", "j3"]) == [("j1", "imp@0"), ("j2", Q0), ("j3", Q1)]
    leases = backend.dequeue(DequeueParams(queues=[Q1], worker_id="w", now=1.0)).leases
    assert [lease.job_id for lease in leases] == ["j3"]


def test_a_master_that_lost_the_functions_gets_them_again(
    backend: RedisBackend, cluster: LocalCluster
) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(1, queue=Q0)], now=0.0))
    port = cluster.master_of(f"x:{{{Q0}}}:meta")
    with redis.Redis(port=port) as master:
        master.function_flush()
        assert master.function_list() == []
    leases = backend.dequeue(DequeueParams(queues=[Q0], worker_id="w", now=1.0)).leases
    assert [lease.job_id for lease in leases] == ["j1"]
    with redis.Redis(port=port) as master:
        assert len(master.function_list()) == 1


def test_an_enqueue_can_wait_for_a_replica(make_backend: Callable[..., RedisBackend]) -> None:
    """With more replicas asked than there are, the claims' WAIT already falls short: nothing
    is stored, and the ids are free again."""
    waiting = make_backend(wait_replicas=1, wait_timeout=5)
    jobs = [new_job(n, queue=q) for n, q in enumerate(QUEUES)]
    assert waiting.enqueue(EnqueueParams(jobs=jobs, now=0.0)).queues == list(QUEUES)
    assert len(ids(waiting, [job.id for job in jobs])) == len(QUEUES)
    impossible = make_backend(wait_replicas=2, wait_timeout=0.2)
    with pytest.raises(NotReplicated, match="nothing was stored: only 1 of the 2 replicas"):
        impossible.enqueue(EnqueueParams(jobs=[new_job(9, queue=Q2)], now=0.0))
    assert ids(waiting, ["j9"]) == []
    waiting.enqueue(EnqueueParams(jobs=[new_job(9, queue=Q2)], now=0.0))
    assert ids(waiting, ["j9"]) == [("j9", Q2)]


def test_unique_keys_per_slot_and_a_held_jobs_claim_is_released(backend: RedisBackend) -> None:
    """A batch over two masters: each job's unique key goes in its queue's call; a job whose
    key is held is not stored, its id's claim is taken out (the id can be used again), and the
    holder's id comes back at the job's place in the batch."""
    assert master_index(Q0) != master_index(Q1)
    keyed = [
        replace(new_job(1, queue=Q0), unique=Unique(key="k", window=60.0)),
        replace(new_job(2, queue=Q1), unique=Unique(key="k", window=60.0)),
    ]
    backend.enqueue(EnqueueParams(jobs=keyed, now=0.0))
    again = [
        new_job(5, queue=Q1),
        replace(new_job(3, queue=Q0), unique=Unique(key="k", window=60.0)),
        replace(new_job(4, queue=Q1), unique=Unique(key="k", window=60.0)),
    ]
    result = backend.enqueue(EnqueueParams(jobs=again, now=1.0))
    assert result.existing == {1: "j1", 2: "j2"}
    assert result.queues == [Q1, Q0, Q1]
    assert ids(backend, ["j1", "j2", "j3", "j4", "j5"]) == [("j1", Q0), ("j2", Q1), ("j5", Q1)]
    backend.enqueue(EnqueueParams(jobs=[new_job(3, queue=Q2), new_job(4, queue=Q2)], now=2.0))
    assert ids(backend, ["j3", "j4"]) == [("j3", Q2), ("j4", Q2)]


def test_a_keyed_id_refused_in_its_slot_names_the_jobs_other_slots_stored(
    backend: RedisBackend,
) -> None:
    """A job with a unique key whose id another call stored in its queue is left to its
    slot's call (directory.py), which refuses it after the other slots' calls stored their
    jobs: the error must say so, not that nothing was stored (a caller would enqueue them
    twice)."""
    assert master_index(Q0) != master_index(Q1)
    first = replace(new_job(1, queue=Q0), unique=Unique(key="a", window=60.0))
    backend.enqueue(EnqueueParams(jobs=[first], now=0.0))
    batch = [new_job(2, queue=Q1), replace(first, unique=Unique(key="b", window=60.0))]
    with pytest.raises(DuplicateJob, match="j1") as refused:
        backend.enqueue(EnqueueParams(jobs=batch, now=1.0))
    assert ids(backend, ["j1", "j2"]) == [("j1", Q0), ("j2", Q1)]
    assert "nothing was stored" not in str(refused.value)
    assert "were stored: ['j2']" in str(refused.value)
