"""Sharded jobs: the store puts each in the least loaded of the shards it names
(``fairq.policy.shards.least_loaded``): the fewest turns before it starts, (own ready + 1) *
(other eligible tenants + 1), then fewer others, then the first named. Each job of a batch
sees those before it. Shards are queues like any other once a job is in one: fairness,
dequeue and stats are theirs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fairq.contract import Backend, EnqueueParams, GetJobsParams, StatsParams
from fairq.errors import ConfigError, DuplicateJob
from fairq.job import NewJob
from fairq.policy.shards import MAX_OTHERS
from fairq.policy.throttle import Throttle

from .helpers import new_job, take

S0, S1, S2, S3 = "imports@0", "imports@1", "imports@2", "imports@3"


def sharded(n: int, tenant: str, shards: tuple[str, ...]) -> NewJob:
    return replace(new_job(n, tenant, queue=shards[0]), shards=shards)


def put(backend: Backend, jobs: list[NewJob], now: float = 0.0) -> list[str]:
    return list(backend.enqueue(EnqueueParams(jobs=jobs, now=now)).queues)


def ready_by_queue(backend: Backend) -> dict[tuple[str, str], int]:
    return {(s.queue, s.tenant): s.ready for s in backend.stats(StatsParams()) if s.ready}


def test_a_tenant_alone_alternates_over_its_shards(backend: Backend) -> None:
    """A lone tenant is eligible in every shard it uses, so its own ready jobs decide: the
    flood of one tenant spreads evenly, and the pools of all its shards work on it."""
    went = put(backend, [sharded(n, "a", (S1, S3)) for n in range(5)])
    assert went == [S1, S3, S1, S3, S1]
    assert ready_by_queue(backend) == {(S1, "a"): 3, (S3, "a"): 2}


def test_one_at_a_time_chooses_as_a_batch_does(backend: Backend) -> None:
    went = [put(backend, [sharded(n, "a", (S1, S3))], now=float(n))[0] for n in range(4)]
    assert went == [S1, S3, S1, S3]


def test_a_job_goes_where_it_starts_soonest(backend: Backend) -> None:
    put(backend, [sharded(n, "flood", (S0, S1)) for n in range(10)])
    # b shares S1 with the flood: its other shard S2 gets two of every three of its jobs
    went = put(backend, [sharded(n, "b", (S1, S2)) for n in range(10, 16)])
    assert went == [S2, S2, S1, S2, S2, S1]
    # c shares both of the flood's shards, and S1 with b as well: S0 first, then S1
    assert put(backend, [sharded(20, "c", (S1, S0)), sharded(21, "c", (S1, S0))]) == [S0, S1]


def test_ties_go_to_the_first_named_shard(backend: Backend) -> None:
    assert put(backend, [sharded(1, "a", (S2, S0))]) == [S2]
    assert put(backend, [sharded(2, "b", (S3, S2))]) == [S3]  # S2 has a: 1 eligible
    assert put(backend, [sharded(3, "c", (S0, S1))]) == [S0]  # both empty: the first


def test_the_chosen_shard_is_the_jobs_queue_everywhere(backend: Backend) -> None:
    went = put(backend, [sharded(1, "a", (S2, S1))])
    assert went == [S2]
    (info,) = backend.get_jobs(GetJobsParams(ids=["j1"]))
    assert info.queue == S2
    (lease,) = take(backend, now=1.0, queues=[S2])
    assert (lease.queue, lease.job_id) == (S2, "j1")


def test_a_job_in_a_shard_is_served_fairly_there(backend: Backend) -> None:
    put(backend, [sharded(n, "flood", (S0, S1)) for n in range(6)])
    put(backend, [sharded(10, "c", (S0, S1))], now=1.0)  # ties with the flood: S0
    order = [lease.tenant for lease in take(backend, now=2.0, limit=3, queues=[S0])]
    assert order[:2] == ["flood", "c"]  # c's first job waits one turn, not the whole flood


def test_a_repeated_id_stores_nothing(backend: Backend) -> None:
    put(backend, [sharded(1, "a", (S0, S1))])
    with pytest.raises(DuplicateJob):
        put(backend, [sharded(2, "a", (S0, S1)), sharded(1, "b", (S2, S3))])
    assert ready_by_queue(backend) == {(S0, "a"): 1}
    assert backend.get_jobs(GetJobsParams(ids=["j2"])) == []


def test_a_sharded_job_takes_no_throttle_rules() -> None:
    with pytest.raises(ConfigError, match="no throttle rules"):
        NewJob(
            id="x", name="task", queue=S0, tenant="a", payload="{}", run_at=0.0,
            max_attempts=1, lease_timeout=1.0, cost=1.0, shards=(S0, S1),
            throttle=(Throttle(1, 10.0, "slow"),),
        )  # fmt: skip


def test_a_shard_name_out_of_form_is_refused() -> None:
    with pytest.raises(ConfigError, match="queue name"):
        replace(new_job(1, "a", queue=S0), shards=(S0, "imports@x"))


def test_other_tenants_count_up_to_a_hundred(backend: Backend) -> None:
    """Beyond MAX_OTHERS a shard is simply crowded: 101 others and 150 others weigh alike (so
    the first named wins), which keeps the count cheap however many tenants wait."""
    assert MAX_OTHERS == 100
    crowd = [new_job(n, f"s0-{n}", queue=S0) for n in range(101)]
    crowd += [new_job(1000 + n, f"s1-{n}", queue=S1) for n in range(150)]
    put(backend, crowd)
    assert put(backend, [sharded(5000, "x", (S1, S0))]) == [S1]
    put(backend, [new_job(6000 + n, f"s2-{n}", queue=S2) for n in range(99)])
    assert put(backend, [sharded(5001, "y", (S1, S2))]) == [S2]  # 99 others: fewer
