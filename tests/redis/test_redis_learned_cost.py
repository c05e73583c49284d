"""The Redis store's side of learned costs and relayed claims (the rules: tests/conformance).

A job record carries two flags (declared ``learn_cost=False``; a relayed job not claimed yet)
and, while running, its name; a record an older fairq wrote has none of them and must read
as learned and claimed, so a Redis upgraded in place keeps its jobs running.
"""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import redis
from redis_helpers import new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.records import JOB_FIXED, JobRecord
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    JobCost,
    JobCostsParams,
    JobType,
    MaintainParams,
    PublishJobTypesParams,
    StatsParams,
)
from fairq.job import JobState, Lease


def stored(raw: redis.Redis, backend: RedisBackend, job_id: str) -> bytes:
    found: bytes = raw.hget(backend.layout.queue_key("default", "jobs"), job_id)
    return found


def as_an_older_fairq_wrote_it(record: bytes) -> bytes:
    """The record without the flags in its mask and without the name after its fields."""
    mask = int.from_bytes(record[:2], "big") & 0x3F  # the six optional fields' bits
    size = struct.calcsize(">H" + JOB_FIXED + "d" * bin(mask).count("1"))
    return mask.to_bytes(2, "big") + record[2:size]


def take(
    backend: RedisBackend, now: float, limit: int = 1, hold: float | None = None
) -> list[Lease]:
    params = DequeueParams(queues=["default"], worker_id="w", now=now, limit=limit, hold=hold)
    return list(backend.dequeue(params).leases)


def test_the_flags_read_back_as_written(backend: RedisBackend, raw: redis.Redis) -> None:
    jobs = [replace(new_job(0), learn_cost=False), new_job(1)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    take(backend, 0.0, limit=2, hold=5.0)
    fixed, learned = (JobRecord.parse(stored(raw, backend, i)) for i in ("j0", "j1"))
    assert (fixed.learn_cost, fixed.claimed) == (False, False)
    assert (learned.learn_cost, learned.claimed) == (True, False)


def test_records_an_older_fairq_wrote_read_as_learned_and_claimed(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    """Upgraded in place: two jobs an older fairq handed out and one it left ready."""
    backend.enqueue(EnqueueParams(jobs=[new_job(n) for n in range(3)], now=0.0))
    take(backend, 0.0, limit=2)
    jobs = backend.layout.queue_key("default", "jobs")
    for job_id in ("j0", "j1", "j2"):
        record = stored(raw, backend, job_id)
        old = as_an_older_fairq_wrote_it(record)
        assert len(old) < len(record) or job_id == "j2"  # a running job's name is dropped
        raw.hset(jobs, job_id, old)
        assert (JobRecord.parse(old).learn_cost, JobRecord.parse(old).claimed) == (True, True)
    acked = backend.ack_many(AckManyParams(tokens=["j0:1"], now=0.5))
    assert list(acked.acked) == ["j0:1"]  # its name read from its body
    assert backend.job_costs(JobCostsParams()) == [
        JobCost(queue="default", name="task", runs=1, estimate=0.5)
    ]
    (expired,) = backend.maintain(MaintainParams(now=30.0)).expired  # j1: a run, not a hold
    assert (expired.job_id, expired.claimed, expired.attempt) == ("j1", True, 1)
    (row,) = backend.stats(StatsParams())
    assert (row.succeeded, row.failed, row.ready, row.running) == (1, 1, 2, 0)
    leases = take(backend, 31.0, limit=2)
    assert sorted((lease.job_id, lease.cost) for lease in leases) == [("j1", 0.5), ("j2", 0.5)]
    infos = backend.get_jobs(GetJobsParams(ids=["j0", "j1", "j2"]))
    assert [info.state for info in infos] == [JobState.SUCCEEDED, *[JobState.RUNNING] * 2]


def test_published_job_types_keep_learn_cost(backend: RedisBackend, raw: redis.Redis) -> None:
    fixed = JobType(name="t", queue="default", tenant_arg="tenant", params=("tenant",),
                    max_attempts=3, lease_timeout=30.0, cost=2.0, learn_cost=False)  # fmt: skip
    learned = replace(fixed, name="u", learn_cost=True)
    backend.publish_job_types(PublishJobTypesParams(types=[fixed, learned]))
    assert backend.job_types() == {"t": fixed, "u": learned}
    # A type an older fairq published (without the field) learns.
    older = json.loads(raw.hget(backend.layout.types, "t"))
    del older["learn_cost"]
    raw.hset(backend.layout.types, "t", json.dumps(older))
    assert backend.job_types()["t"] == replace(fixed, learn_cost=True)


def test_a_jobs_name_is_read_from_its_body_whatever_it_holds(backend: RedisBackend) -> None:
    """The name the costs are learned under is the job's, with headers before it or not."""
    names = ["a:1", "12:ab", "x" * 300]
    jobs = [replace(new_job(n), name=name) for n, name in enumerate(names)]
    jobs[1] = replace(jobs[1], headers={"trace": "7:h9:"})
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    leases = take(backend, 0.0, limit=3)
    backend.ack_many(AckManyParams(tokens=[lease.token for lease in leases], now=0.25))
    found = backend.job_costs(JobCostsParams())
    assert [(c.name, c.runs, c.estimate) for c in found] == [(n, 1, 0.25) for n in sorted(names)]
