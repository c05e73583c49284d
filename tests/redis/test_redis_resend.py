"""A reply lost with its connection: redis-py sends the command again on a new connection.

A proxy between the backend and the test Redis drops the connection right after forwarding
one call of an operation, so the server runs it and the client never hears so; redis-py
sends it again. Each scenario runs twice, through the proxy and straight to Redis (another
prefix): the call sent twice must answer as the call sent once, and leave the same store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from redis_apps import make_app
from redis_helpers import CuttingProxy, new_job

from fairq import JobState
from fairq.backends.redis import RedisBackend
from fairq.backends.redis.scripts import library
from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    StatsParams,
    ThrottleWindowsParams,
)
from fairq.errors import DuplicateJob
from fairq.policy.throttle import Throttle
from fairq.worker import Worker

Arm = Callable[[str], None]
IDS = ["j0", "j1", "j2", "j3"]


@pytest.fixture
def proxy(redis_url: str, raw: redis.Redis) -> Iterator[CuttingProxy]:
    cutter = CuttingProxy(urlsplit(redis_url).port or 6379, marker=b"")
    yield cutter
    cutter.close()


@pytest.fixture
def cut(proxy: CuttingProxy, redis_url: str, prefix: str) -> Iterator[RedisBackend]:
    """A backend talking to Redis through the proxy."""
    database = urlsplit(redis_url).path or "/0"
    url = f"redis://127.0.0.1:{proxy.port}{database}?prefix={prefix}&clock=caller"
    backend = RedisBackend.from_url(url)
    yield backend
    backend.close()


def arming(proxy: CuttingProxy) -> Arm:
    """Cut the connection after the next call of operation ``op``."""

    def arm(op: str) -> None:
        proxy.marker = library().function(op).encode() + b"\r\n"  # the name ends its bulk string
        proxy.armed.set()

    return arm


def sent_twice_as_once(
    scenario: Callable[[RedisBackend, Arm], Any],
    cut: RedisBackend,
    proxy: CuttingProxy,
    make_backend: Callable[..., RedisBackend],
) -> Any:
    """Run ``scenario`` through the proxy (one call cut) and straight to Redis; both must
    give the same result and leave the same jobs and tenants. Returns the result."""
    result = scenario(cut, arming(proxy))
    assert proxy.cuts == 1  # the first sending reached the server, and its reply was lost
    once = make_backend(prefix=f"{cut.layout.prefix}once")
    assert result == scenario(once, lambda op: None)
    assert cut.get_jobs(GetJobsParams(ids=IDS)) == once.get_jobs(GetJobsParams(ids=IDS))
    assert cut.stats(StatsParams()) == once.stats(StatsParams())
    return result


def test_an_enqueue_sent_again_after_its_reply_was_lost_succeeds_once(
    cut: RedisBackend, proxy: CuttingProxy
) -> None:
    cut.enqueue(EnqueueParams(jobs=[new_job(0)], now=1.0))  # loads the library
    arming(proxy)("enqueue")
    jobs = [new_job(1, "a"), new_job(2, "b", queue="other")]
    assert cut.enqueue(EnqueueParams(jobs=jobs, now=time.time())).queues == ["default", "other"]
    assert proxy.cuts == 1
    assert [info.id for info in cut.get_jobs(GetJobsParams(ids=["j1", "j2"]))] == ["j1", "j2"]
    # A real duplicate is still refused, even one identical to what is stored: only a
    # command redis-py sent again gets its first sending's reply.
    with pytest.raises(DuplicateJob, match="j0"):
        cut.enqueue(EnqueueParams(jobs=[new_job(0)], now=1.0))
    with pytest.raises(DuplicateJob, match="j1"):
        cut.enqueue(EnqueueParams(jobs=[new_job(1, "a")], now=time.time()))


def test_an_async_enqueue_sent_again_after_its_reply_was_lost_succeeds_once(
    cut: RedisBackend, proxy: CuttingProxy
) -> None:
    """The asyncio store (redis/aio.py) sends an enqueue once, as the blocking one does:
    redis.asyncio's retry after the lost reply gets the first sending's reply."""
    from fairq.backends.redis.aio import AsyncRedisStore

    store = AsyncRedisStore(cut)

    async def scenario() -> list[str]:
        try:
            await store.enqueue(EnqueueParams(jobs=[new_job(0)], now=1.0))  # loads the library
            arming(proxy)("enqueue")
            jobs = [new_job(1, "a"), new_job(2, "b", queue="other")]
            return list((await store.enqueue(EnqueueParams(jobs=jobs, now=time.time()))).queues)
        finally:
            await store.aclose()

    assert asyncio.run(scenario()) == ["default", "other"]
    assert proxy.cuts == 1
    assert [info.id for info in cut.get_jobs(GetJobsParams(ids=["j1", "j2"]))] == ["j1", "j2"]


def test_a_dequeue_sent_again_leases_one_batch(
    cut: RedisBackend, proxy: CuttingProxy, make_backend: Callable[..., RedisBackend]
) -> None:
    def scenario(backend: RedisBackend, arm: Arm) -> Any:
        backend.enqueue(EnqueueParams(jobs=[new_job(n, "ab"[n % 2]) for n in range(4)], now=0.0))
        arm("dequeue")
        return backend.dequeue(
            DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=2)
        ).leases

    leases = sent_twice_as_once(scenario, cut, proxy, make_backend)
    assert [lease.job_id for lease in leases] == ["j0", "j1"]  # no other job leased to nobody
    assert [info.state.value for info in cut.get_jobs(GetJobsParams(ids=IDS))] == [
        "running"
    ] * 2 + ["ready"] * 2


def test_a_relays_dequeue_sent_again_holds_its_jobs_unclaimed(
    cut: RedisBackend, proxy: CuttingProxy, make_backend: Callable[..., RedisBackend]
) -> None:
    """The leases of a re-sent dequeue with a hold stay unclaimed, held for the hold (not for
    their own lease) from the re-sending's time: here the same, the virtual clock's."""

    def scenario(backend: RedisBackend, arm: Arm) -> Any:
        backend.enqueue(EnqueueParams(jobs=[new_job(n, "ab"[n % 2]) for n in range(4)], now=0.0))
        arm("dequeue")
        params = DequeueParams(queues=["default"], worker_id="relay", now=1.0, limit=2, hold=5.0)
        return backend.dequeue(params).leases

    leases = sent_twice_as_once(scenario, cut, proxy, make_backend)
    assert [(lease.job_id, lease.deadline) for lease in leases] == [("j0", 6.0), ("j1", 6.0)]


def test_an_ack_and_dequeue_sent_again_acks_and_leases_once(
    cut: RedisBackend, proxy: CuttingProxy, make_backend: Callable[..., RedisBackend]
) -> None:
    def scenario(backend: RedisBackend, arm: Arm) -> Any:
        backend.enqueue(EnqueueParams(jobs=[new_job(n) for n in range(3)], now=0.0))
        (first,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=1.0)).leases
        arm("ack_dequeue")
        return backend.ack_and_dequeue(
            AckAndDequeueParams(
                acks=AckManyParams(tokens=[first.token], now=2.0),
                dequeue=DequeueParams(queues=["default"], worker_id="w", now=2.0),
            )
        )

    result = sent_twice_as_once(scenario, cut, proxy, make_backend)
    assert (result.acks.acked, result.acks.lost) == (["j0:1"], [])
    assert [lease.job_id for lease in result.dequeue.leases] == ["j1"]
    assert [info.state.value for info in cut.get_jobs(GetJobsParams(ids=IDS[:3]))] == [
        "succeeded",
        "running",
        "ready",
    ]


def test_an_ack_sent_again_succeeds(
    cut: RedisBackend, proxy: CuttingProxy, make_backend: Callable[..., RedisBackend]
) -> None:
    def scenario(backend: RedisBackend, arm: Arm) -> Any:
        backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
        (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=1.0)).leases
        arm("ack_many")
        return backend.ack_many(AckManyParams(tokens=[lease.token], now=2.0))  # no LeaseNotFound

    sent_twice_as_once(scenario, cut, proxy, make_backend)
    assert cut.get_jobs(GetJobsParams(ids=["j0"]))[0].state.value == "succeeded"


def test_an_ack_many_sent_again_reports_no_lease_lost(
    cut: RedisBackend, proxy: CuttingProxy, make_backend: Callable[..., RedisBackend]
) -> None:
    def scenario(backend: RedisBackend, arm: Arm) -> Any:
        backend.enqueue(EnqueueParams(jobs=[new_job(0), new_job(1, "b")], now=0.0))
        params = DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=2)
        tokens = [lease.token for lease in backend.dequeue(params).leases]
        arm("ack_many")
        return backend.ack_many(AckManyParams(tokens=tokens, now=2.0))

    result = sent_twice_as_once(scenario, cut, proxy, make_backend)
    assert (result.acked, result.lost) == (["j0:1", "j1:1"], [])


def test_a_throttled_enqueue_sent_again_counts_its_window_once(
    cut: RedisBackend, proxy: CuttingProxy, make_backend: Callable[..., RedisBackend]
) -> None:
    def scenario(backend: RedisBackend, arm: Arm) -> Any:
        backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))  # loads the library
        arm("route")
        job = replace(new_job(1), throttle=(Throttle(1, 60.0, "slow"),))
        queues = backend.enqueue(EnqueueParams(jobs=[job], now=5.0)).queues
        return queues, backend.throttle_windows(
            ThrottleWindowsParams(keys=[("task", "a")], now=5.0)
        )

    queues, windows = sent_twice_as_once(scenario, cut, proxy, make_backend)
    assert (queues, windows) == (["default"], {("task", "a"): [5.0]})  # not 2 > 1: "slow"


def test_a_dequeue_pipelined_behind_its_wait_and_sent_again_leases_one_batch(
    cut: RedisBackend, proxy: CuttingProxy
) -> None:
    cut.enqueue(EnqueueParams(jobs=[new_job(n, "ab"[n % 2]) for n in range(4)], now=0.0))
    arming(proxy)("dequeue")
    params = DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=2, wait=2.0)
    leases = cut.dequeue(params).leases  # its start times are the server's: compared by job only
    assert proxy.cuts == 1
    assert [lease.job_id for lease in leases] == ["j0", "j1"]
    assert [info.state.value for info in cut.get_jobs(GetJobsParams(ids=IDS))] == [
        "running"
    ] * 2 + ["ready"] * 2


def test_a_worker_whose_ack_is_sent_again_logs_no_lost_lease(
    cut: RedisBackend, proxy: CuttingProxy, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(cut.options.safe_url)  # through the proxy, with the test's prefix
    ids = [app.jobs["touch"].enqueue("t", str(tmp_path), f"job{n}") for n in range(6)]
    proxy.marker = library().function("ack").encode()  # its first ack, ack_many or ack_dequeue
    proxy.armed.set()
    with caplog.at_level(logging.WARNING, logger="fairq"):
        Worker(app, concurrency=2, burst=True).run()
    app.close()
    assert proxy.cuts == 1
    assert [r.getMessage() for r in caplog.records] == []  # no "lease lost"
    assert [i.state for i in cut.get_jobs(GetJobsParams(ids=ids))] == [JobState.SUCCEEDED] * 6
