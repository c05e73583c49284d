"""Kept results (fairq/results.py): an ack may keep a job's JSON return value, which
``get_jobs`` shows until it expires; then maintenance deletes the job with it, whatever the
retention. A value that is not JSON, or over the size limit, is refused before any store sees
it, naming the job."""

from __future__ import annotations

import json

import pytest

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    Backend,
    DequeueParams,
    FailParams,
    GetJobsParams,
    MaintainParams,
    RequeueParams,
    StatsParams,
)
from fairq.errors import ResultError, ResultTooLarge
from fairq.job import JobState
from fairq.results import JobResult, encode_result

from .helpers import Q, enqueue, job, new_job, new_jobs, snapshot, stat, take, take_one

VALUE = {"rows": 3, "names": ["é", "🐍", "a\u0000b"], "ok": True, "ratio": 0.5, "none": None}


def kept(value: object, keep: float = 60.0) -> JobResult:
    return JobResult(value=encode_result(value, name="task", job_id="j", max_bytes=10_000),
                     keep=keep)  # fmt: skip


def test_a_result_is_kept_with_the_ack_and_shown(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1]))
    first, second = take(backend, 0.0, limit=2)
    result = backend.ack_many(
        AckManyParams(
            tokens=[first.token, second.token], now=2.0, results={first.token: kept(VALUE)}
        )
    )
    assert list(result.acked) == [first.token, second.token]
    info = job(backend, "j0")
    assert (info.state, info.result, info.result_until) == (JobState.SUCCEEDED, VALUE, 62.0)
    plain = job(backend, "j1")
    assert (plain.state, plain.result, plain.result_until) == (JobState.SUCCEEDED, None, None)
    assert stat(backend, "a").succeeded == 2


def test_a_job_requeued_from_dead_keeps_the_result_of_its_new_run(backend: Backend) -> None:
    enqueue(backend, [new_job(0, max_attempts=1)])
    lease = take_one(backend, 1.0)
    backend.fail(FailParams(token=lease.token, now=2.0, error="boom", retry_at=None))
    assert backend.requeue(RequeueParams(ids=["j0"], now=3.0)) == 1
    lease = take_one(backend, 4.0)
    backend.ack_many(AckManyParams(tokens=[lease.token], now=5.0, results={lease.token: kept(7)}))
    info = job(backend, "j0")
    assert (info.state, info.result, info.result_until) == (JobState.SUCCEEDED, 7, 65.0)


def test_null_and_scalars_are_results_too(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1, 2]))
    leases = take(backend, 0.0, limit=3)
    values = [None, "text", 12345678901234]
    results = {lease.token: kept(v) for lease, v in zip(leases, values, strict=True)}
    backend.ack_many(AckManyParams(tokens=[x.token for x in leases], now=1.0, results=results))
    for n, value in enumerate(values):
        info = job(backend, f"j{n}")
        assert (info.result, info.result_until) == (value, 61.0)


def test_a_lost_lease_keeps_no_result(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=5.0)])
    lease = take_one(backend, 0.0)
    result = backend.ack_many(
        AckManyParams(tokens=[lease.token], now=10.0, results={lease.token: kept(1)})
    )
    assert list(result.lost) == [lease.token]
    assert (job(backend, "j0").state, job(backend, "j0").result) == (JobState.RUNNING, None)
    again = take_one(backend, 11.0)  # its expiry made it ready again
    backend.ack_many(AckManyParams(tokens=[again.token], now=12.0))
    assert job(backend, "j0").result_until is None


def test_ack_and_dequeue_keeps_results_too(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1]))
    first = take_one(backend, 0.0)
    both = backend.ack_and_dequeue(
        AckAndDequeueParams(
            acks=AckManyParams(tokens=[first.token], now=1.0, results={first.token: kept([1])}),
            dequeue=DequeueParams(queues=[Q], worker_id="w1", now=1.0),
        )
    )
    assert [x.job_id for x in both.dequeue.leases] == ["j1"]
    assert (job(backend, "j0").result, job(backend, "j0").result_until) == ([1], 61.0)


def test_a_result_outlives_the_retention_and_goes_when_it_expires(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", [0, 1]))
    with_result, plain = take(backend, 0.0, limit=2)
    backend.ack_many(
        AckManyParams(
            tokens=[with_result.token, plain.token],
            now=1.0,
            results={with_result.token: kept("v", keep=100.0)},
        )
    )
    assert backend.maintain(MaintainParams(now=50.0, retention=10.0)).pruned == 1  # the plain one
    assert [i.id for i in backend.get_jobs(GetJobsParams(ids=["j0", "j1"]))] == ["j0"]
    assert job(backend, "j0").result == "v"
    assert backend.maintain(MaintainParams(now=100.9, retention=10.0)).pruned == 0
    assert backend.maintain(MaintainParams(now=101.0)).pruned == 0  # no retention: no pruning
    assert backend.maintain(MaintainParams(now=101.0, retention=10.0)).pruned == 1
    assert backend.get_jobs(GetJobsParams(ids=["j0"])) == []
    assert backend.stats(StatsParams(tenant="a")) == []  # nothing left: the tenant is forgotten


def test_a_short_result_ttl_goes_before_the_retention(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    lease = take_one(backend, 0.0)
    backend.ack_many(
        AckManyParams(tokens=[lease.token], now=1.0, results={lease.token: kept(1, 5.0)})
    )
    assert backend.maintain(MaintainParams(now=6.0, retention=3600.0)).pruned == 1
    assert backend.get_jobs(GetJobsParams(ids=["j0"])) == []


def test_a_result_at_the_size_limit_is_kept_whole(backend: Backend) -> None:
    limit = 2048
    value = "x" * (limit - 2)  # two bytes of quotes
    text = encode_result(value, name="task", job_id="j0", max_bytes=limit)
    assert len(text.encode()) == limit
    enqueue(backend, [new_job(0, "a")])
    lease = take_one(backend, 0.0)
    backend.ack_many(
        AckManyParams(
            tokens=[lease.token], now=1.0, results={lease.token: JobResult(value=text, keep=9.0)}
        )
    )
    assert job(backend, "j0").result == value


def test_a_result_over_the_size_limit_is_refused_before_any_store(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    take_one(backend, 0.0)
    before = snapshot(backend, ["j0"])
    with pytest.raises(ResultTooLarge) as found:
        encode_result("x" * 2047, name="report", job_id="j0", max_bytes=2048)
    message = str(found.value)
    assert "'report'" in message and "j0" in message and "2049 bytes" in message
    assert "2048" in message and "max_payload_bytes" in message
    assert snapshot(backend, ["j0"]) == before


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (object(), "object"),
        ({1: "a"}, "dict key 1"),
        (float("nan"), "non-finite float nan"),
        ({"a": {1, 2}}, "dict"),
        ("\udc80", "lone surrogate"),
    ],
)
def test_a_value_that_is_not_json_is_refused_naming_the_job(value: object, names: str) -> None:
    with pytest.raises(ResultError) as found:
        encode_result(value, name="report", job_id="j7", max_bytes=10_000)
    message = str(found.value)
    assert "'report'" in message and "j7" in message and names in message
    assert not isinstance(found.value, ResultTooLarge)


def test_results_are_compact_json() -> None:
    assert encode_result({"a": [1, 2]}, name="t", job_id="j", max_bytes=100) == '{"a":[1,2]}'
    assert json.loads(encode_result("é", name="t", job_id="j", max_bytes=100)) == "é"
