"""Waiting without polling: an idle waiter wakes when work arrives, and the wake list is bounded."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import redis
from redis_helpers import new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.waiting import Waiter
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    TenantSettingsParams,
    WaitParams,
)

BOUND = 30.0  # only so a broken wake-up fails the test instead of hanging it
#: How long a waiter is given to (wrongly) wake: the test can only fail by waiting too
#: little, never pass wrongly by waiting too long.
NOT_WOKEN = 1.0


def started(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def ends(target: Callable[[], object]) -> bool:
    """Whether ``target`` returns within BOUND (run in a thread, so a hang fails, not hangs)."""
    thread = started(target)
    thread.join(BOUND)
    return not thread.is_alive()


def test_a_waiting_worker_wakes_when_a_job_is_enqueued(backend: RedisBackend) -> None:
    woke = threading.Event()
    started = threading.Event()

    def idle_worker() -> None:
        started.set()
        backend.wait(WaitParams(queues=["default"], timeout=BOUND))
        woke.set()

    thread = threading.Thread(target=idle_worker)
    thread.start()
    started.wait(BOUND)
    backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    assert woke.wait(BOUND)
    thread.join()
    assert backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=0.0)).leases


def test_a_wake_up_left_before_waiting_is_not_lost(backend: RedisBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    # the token is already there: the hour-long wait returns at once; a lost one would not
    assert ends(lambda: backend.wait(WaitParams(queues=["default"], timeout=3600.0)))


def test_waiting_on_other_queues_times_out(backend: RedisBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    # an hour-long wait on another queue is not woken by default's token …
    other = started(lambda: backend.wait(WaitParams(queues=["elsewhere"], timeout=3600.0)))
    other.join(NOT_WOKEN)
    assert other.is_alive(), "a token for another queue woke the waiter"
    # … and short ones end by their timeout (0 too: not BLPOP's "for ever")
    assert ends(lambda: backend.wait(WaitParams(queues=["elsewhere"], timeout=0.05)))
    assert ends(lambda: backend.wait(WaitParams(queues=["elsewhere"], timeout=0.0)))
    backend.enqueue(EnqueueParams(jobs=[new_job(1, queue="elsewhere")], now=0.0))
    other.join(BOUND)
    assert not other.is_alive()


def test_the_wake_list_stays_bounded(backend: RedisBackend, raw: redis.Redis, prefix: str) -> None:
    for n in range(300):
        backend.enqueue(EnqueueParams(jobs=[new_job(n)], now=0.0))
    assert raw.llen(backend.layout.queue_key("default", "wake")) <= 64


def test_close_ends_a_wait(backend: RedisBackend) -> None:
    """Closed while a wait of an hour is under way, or before it starts: either way the wait
    ends (a wait after close returns at once)."""
    waiter = Waiter(backend.options, backend.layout)
    asking = threading.Event()

    def wait() -> None:
        asking.set()
        waiter.wait(["default"], 3600.0)

    thread = started(wait)
    assert asking.wait(BOUND)
    waiter.close()
    thread.join(BOUND)
    assert not thread.is_alive(), "close did not end the wait"


def test_a_waiting_dequeue_runs_at_the_servers_clock_when_the_senders_is_older(
    backend: RedisBackend,
) -> None:
    """Pipelined behind its BLPOP, the dequeue runs when the wait ends: it must not date its
    lease (and so shorten it) by the stale time it was sent at."""
    backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    before = time.time()
    leases = backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=0.0, wait=BOUND)
    ).leases
    assert [lease.job_id for lease in leases] == [new_job(0).id]
    assert leases[0].started_at >= before - 0.001  # the same machine's clock, in Redis's µs


def test_a_waiting_dequeue_loads_the_library_when_the_server_lost_it(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    raw.function_flush()
    leases = backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=1.0, wait=BOUND)
    ).leases
    assert [lease.job_id for lease in leases] == [new_job(0).id]


def test_one_token_per_job_that_became_ready_and_one_per_tenant_freed(
    make_backend: Callable[..., RedisBackend], raw: redis.Redis
) -> None:
    """A token nobody needs wakes an idle worker for an empty dequeue; one too few leaves
    work waiting for the poll."""
    backend = make_backend()
    wake = backend.layout.queue_key("default", "wake")
    backend.enqueue(EnqueueParams(jobs=[new_job(0, "a")], now=0.0))
    assert raw.llen(wake) == 1  # the job, which also made its tenant eligible: one token
    backend.enqueue(EnqueueParams(jobs=[new_job(1, "a"), new_job(2, "b")], now=0.0))
    assert raw.llen(wake) == 3
    raw.delete(wake)
    backend.set_tenant(TenantSettingsParams(queue="default", tenant="a", max_running=1, now=0.0))
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=0.0)).leases
    assert lease.tenant == "a" and raw.llen(wake) == 0
    backend.ack_many(AckManyParams(tokens=[lease.token], now=1.0))  # "a" is under its cap again
    assert raw.llen(wake) == 1
