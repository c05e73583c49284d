"""A queue's cap on leased jobs on Redis: wake-up tokens only when a waiter can take something,
and queue settings stored by an earlier fairq still read (the rules: tests/conformance)."""

from __future__ import annotations

import struct

import redis
from redis_helpers import new_job

from fairq.backends.redis import RedisBackend
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetQueueParams,
    QueueSettings,
    SetQueueParams,
)

Q = "default"


def cap(backend: RedisBackend, max_in_flight: int | None) -> None:
    settings = QueueSettings(queue=Q, max_in_flight=max_in_flight)
    backend.set_queue(SetQueueParams(settings=settings, now=0.0))


def take(backend: RedisBackend, limit: int = 1) -> list[str]:
    params = DequeueParams(queues=[Q], worker_id="w", now=0.0, limit=limit)
    return [lease.token for lease in backend.dequeue(params).leases]


def test_a_full_queue_leaves_no_token_until_a_lease_ends(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    """A token while the queue is full would wake an idle relay for an empty dequeue on every
    enqueue; the ack that frees room must leave one, or the relay sleeps through it."""
    wake = backend.layout.queue_key(Q, "wake")
    cap(backend, 2)
    backend.enqueue(EnqueueParams(jobs=[new_job(n, f"t{n}") for n in range(4)], now=0.0))
    assert raw.llen(wake) == 4
    held = take(backend, limit=5)
    assert len(held) == 2
    assert raw.llen(wake) == 0  # the dequeue that filled the queue emptied its list
    backend.enqueue(EnqueueParams(jobs=[new_job(9, "t9")], now=0.0))
    assert raw.llen(wake) == 0
    backend.ack_many(AckManyParams(tokens=held, now=1.0))
    assert raw.llen(wake) == 2  # full to two free: a token per job there is room for
    assert len(take(backend, limit=5)) == 2
    assert raw.llen(wake) == 0


def test_raising_the_cap_of_a_full_queue_wakes_waiters(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    wake = backend.layout.queue_key(Q, "wake")
    cap(backend, 1)
    backend.enqueue(EnqueueParams(jobs=[new_job(n, f"t{n}") for n in range(4)], now=0.0))
    assert len(take(backend, limit=5)) == 1
    assert raw.llen(wake) == 0
    cap(backend, 3)
    assert raw.llen(wake) == 2
    raw.delete(wake)
    cap(backend, None)
    assert raw.llen(wake) == 0  # it was not full: waiters were woken when it last had room


def test_settings_stored_by_an_earlier_fairq_have_no_cap(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    """Before max_in_flight, meta's conf packed seven doubles: it is read as no cap, and the
    next call that saves the queue's meta writes it in the new form."""
    meta = backend.layout.queue_key(Q, "meta")
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue=Q, max_running=2), now=0.0))
    nan = float("nan")
    old = struct.pack(">ddddddd", 1.0, 2.0, nan, nan, nan, nan, 60.0)
    raw.hset(meta, "conf", old)
    raw.hdel(meta, "maxf")
    assert backend.get_queue(GetQueueParams(queue=Q)) == QueueSettings(queue=Q, max_running=2)
    backend.enqueue(EnqueueParams(jobs=[new_job(n) for n in range(4)], now=0.0))
    assert len(take(backend, limit=5)) == 2  # the tenant cap of the old conf holds
    conf = raw.hget(meta, "conf")
    assert conf is not None and len(conf) == 64
