"""The time of an event is the time Redis performs it (``clock=store``, the default).

A call carries the ``now`` its caller read when it built it. Sent again after an outage (a
lost connection: redis-py re-sends it) it runs later than that ``now``; so does a call whose
first sending ran but whose reply was lost (``register_once`` answers the re-sending with the
stored reply). Either way a worker must get its job with its whole lease left, counted from
when Redis handed it out. The proxy makes the outage; ``TIME`` read before and after a call
bounds the server's clock while it ran, so nothing here depends on how long anything takes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from redis_helpers import CuttingProxy, new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.scripts import library
from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    HeartbeatParams,
)
from fairq.errors import ConfigError

LEASE = 30.0  # new_job's lease_timeout
STALE = 3.0  # how far behind the server's clock a call's `now` is: built before an outage


@pytest.fixture
def proxy(redis_url: str, raw: redis.Redis) -> Iterator[CuttingProxy]:
    cutter = CuttingProxy(urlsplit(redis_url).port or 6379, marker=b"")
    yield cutter
    cutter.close()


@pytest.fixture
def through(
    proxy: CuttingProxy, redis_url: str, prefix: str
) -> Iterator[Callable[[str], RedisBackend]]:
    """Opens backends talking to Redis through the proxy, with the given ``clock``."""
    database = urlsplit(redis_url).path or "/0"
    opened: list[RedisBackend] = []

    def make(clock: str) -> RedisBackend:
        url = f"redis://127.0.0.1:{proxy.port}{database}?prefix={prefix}&clock={clock}"
        opened.append(RedisBackend.from_url(url))
        return opened[-1]

    yield make
    for backend in opened:
        backend.close()


def server_time(raw: redis.Redis) -> float:
    seconds, micros = raw.time()
    return seconds + micros / 1_000_000


def arm(proxy: CuttingProxy, op: str, *, drop: bool) -> None:
    """Cut the connection at the next call of ``op``: before Redis sees it (``drop``), or
    after Redis ran it and answered."""
    proxy.marker = library().function(op).encode() + b"\r\n"  # the name ends its bulk string
    proxy.drop = drop
    proxy.armed.set()


def enqueued(backend: RedisBackend, raw: redis.Redis, count: int = 1) -> float:
    """``count`` jobs of tenant a enqueued (loading the library); the server's time then."""
    now = server_time(raw)
    backend.enqueue(EnqueueParams(jobs=[new_job(n) for n in range(count)], now=now))
    return now


def test_a_dequeue_sent_again_after_an_outage_leases_from_the_servers_clock(
    through: Callable[[str], RedisBackend], proxy: CuttingProxy, raw: redis.Redis
) -> None:
    backend = through("store")
    enqueued(backend, raw)
    before = server_time(raw)
    arm(proxy, "dequeue", drop=True)
    params = DequeueParams(queues=["default"], worker_id="w", now=before - STALE)
    (lease,) = backend.dequeue(params).leases
    after = server_time(raw)
    assert proxy.cuts == 1
    assert before <= lease.started_at <= after
    assert before + LEASE <= lease.deadline <= after + LEASE


def test_a_heartbeat_sent_again_after_an_outage_extends_from_the_servers_clock(
    through: Callable[[str], RedisBackend], proxy: CuttingProxy, raw: redis.Redis
) -> None:
    backend = through("store")
    enqueued(backend, raw)
    now = server_time(raw)
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases
    before = server_time(raw)
    arm(proxy, "heartbeat", drop=True)
    result = backend.heartbeat(HeartbeatParams(tokens=[lease.token], now=before - STALE))
    after = server_time(raw)
    assert proxy.cuts == 1
    assert before + LEASE <= result.deadlines[lease.token] <= after + LEASE


def test_with_the_callers_clock_a_call_keeps_its_now(
    through: Callable[[str], RedisBackend], raw: redis.Redis
) -> None:
    backend = through("caller")
    enqueued(backend, raw)
    stale = server_time(raw) - STALE
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=stale)).leases
    assert (lease.started_at, lease.deadline) == (stale, stale + LEASE)


def test_a_dequeue_whose_reply_was_lost_hands_out_its_jobs_with_their_whole_lease(
    through: Callable[[str], RedisBackend], proxy: CuttingProxy, raw: redis.Redis
) -> None:
    """The first sending leased the jobs; by the time the re-sending gets that reply, time
    has passed: each lease is extended from the re-sending's time, as a heartbeat would."""
    backend = through("store")
    enqueued(backend, raw, count=2)
    proxy.resume.clear()  # hold the cut until the server's clock has moved past the first run
    arm(proxy, "dequeue", drop=False)
    taken: list[Any] = []
    worker = threading.Thread(
        target=lambda: taken.append(
            backend.dequeue(
                DequeueParams(queues=["default"], worker_id="w", now=server_time(raw), limit=2)
            )
        )
    )
    worker.start()
    assert proxy.replied.wait(30.0)  # the first sending ran (and leased both jobs)
    ran_before = server_time(raw)
    proxy.resume.set()
    worker.join(30.0)
    after = server_time(raw)
    assert proxy.cuts == 1
    (result,) = taken
    assert [lease.job_id for lease in result.leases] == ["j0", "j1"]
    for lease in result.leases:
        assert lease.started_at < ran_before  # handed out by the first sending
        assert ran_before + LEASE <= lease.deadline <= after + LEASE


def test_an_ack_and_dequeue_whose_reply_was_lost_leaves_out_a_lease_no_longer_held(
    through: Callable[[str], RedisBackend], proxy: CuttingProxy, raw: redis.Redis
) -> None:
    """Between the first sending and the re-sending, another client acked one of the jobs
    it leased (a stale worker's token cannot, but an operator's can): the re-sending's answer
    leaves it out and extends the other."""
    backend = through("store")
    enqueued(backend, raw, count=3)
    now = server_time(raw)
    (first,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases
    proxy.resume.clear()
    arm(proxy, "ack_dequeue", drop=False)
    taken: list[Any] = []
    params = AckAndDequeueParams(
        acks=AckManyParams(tokens=[first.token], now=now),
        dequeue=DequeueParams(queues=["default"], worker_id="w", now=now, limit=2),
    )
    worker = threading.Thread(target=lambda: taken.append(backend.ack_and_dequeue(params)))
    worker.start()
    assert proxy.replied.wait(30.0)
    other = through("store")  # straight on: another connection through the proxy, not cut
    ran_before = server_time(raw)
    acked = other.ack_many(AckManyParams(tokens=["j1:1"], now=ran_before))
    assert acked.acked == ["j1:1"]
    proxy.resume.set()
    worker.join(30.0)
    after = server_time(raw)
    (result,) = taken
    assert result.acks.acked == [first.token]
    (lease,) = result.dequeue.leases
    assert lease.job_id == "j2"
    assert ran_before + LEASE <= lease.deadline <= after + LEASE


def test_a_heartbeat_whose_reply_was_lost_extends_from_the_resendings_time(
    through: Callable[[str], RedisBackend], proxy: CuttingProxy, raw: redis.Redis
) -> None:
    backend = through("store")
    enqueued(backend, raw)
    now = server_time(raw)
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases
    proxy.resume.clear()
    arm(proxy, "heartbeat", drop=False)
    beats: list[Any] = []
    params = HeartbeatParams(tokens=[lease.token], now=now)
    worker = threading.Thread(target=lambda: beats.append(backend.heartbeat(params)))
    worker.start()
    assert proxy.replied.wait(30.0)
    ran_before = server_time(raw)
    proxy.resume.set()
    worker.join(30.0)
    after = server_time(raw)
    (result,) = beats
    assert ran_before + LEASE <= result.deadlines[lease.token] <= after + LEASE


def test_an_unknown_clock_option_is_refused_with_the_choices(redis_url: str) -> None:
    with pytest.raises(ConfigError, match=r"clock=store .*clock=caller"):
        RedisBackend.from_url(f"{redis_url}?clock=server")
