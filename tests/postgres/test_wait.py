"""LISTEN/NOTIFY: an idle worker's wait ends when work arrives, not when a poll comes round.

These tests wait on events with generous safety timeouts; they assert what woke the waiter
(a long wait returned early), never how fast.
"""

from __future__ import annotations

import threading

import psycopg

from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    QueueSettings,
    SetQueueParams,
    WaitParams,
)

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .helpers import new_job

LONG = 120.0  # a wait that ends by itself would fail the join below
JOIN = 60.0
#: How long a waiter is given to (wrongly) wake: the test can only fail by waiting too
#: little, never pass wrongly by waiting too long.
NOT_WOKEN = 1.0


def waiting(pg: DisposableBackend, queues: list[str]) -> threading.Thread:
    pg.wait(
        WaitParams(queues=queues, timeout=0.01)
    )  # the first wait on a queue subscribes and returns at once
    thread = threading.Thread(
        target=pg.wait, args=(WaitParams(queues=queues, timeout=LONG),), daemon=True
    )
    thread.start()
    return thread


def test_a_wait_ends_when_a_job_is_enqueued(pg: DisposableBackend) -> None:
    thread = waiting(pg, ["default"])
    pg.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    thread.join(JOIN)
    assert not thread.is_alive()


def test_a_wait_ends_when_a_transactional_enqueue_commits(pg: DisposableBackend) -> None:
    thread = waiting(pg, ["default"])
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn, conn.transaction():
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(0)], now=0.0))
    thread.join(JOIN)
    assert not thread.is_alive()


def test_a_wait_ends_when_an_ack_frees_a_capped_tenants_slot(pg: DisposableBackend) -> None:
    pg.set_queue(SetQueueParams(settings=QueueSettings(queue="default", max_running=1), now=0.0))
    pg.enqueue(EnqueueParams(jobs=[new_job(0), new_job(1)], now=0.0))
    (lease,) = pg.dequeue(DequeueParams(queues=["default"], worker_id="w", now=1.0)).leases
    thread = waiting(pg, ["default"])
    pg.ack_many(AckManyParams(tokens=[lease.token], now=2.0))
    thread.join(JOIN)
    assert not thread.is_alive()


def test_close_ends_a_wait_in_progress(pg: DisposableBackend) -> None:
    thread = waiting(pg, ["default"])
    pg.close()
    thread.join(JOIN)
    assert not thread.is_alive()


def test_work_in_another_queue_does_not_matter_to_a_fresh_listener(
    pg: DisposableBackend,
) -> None:
    """Only subscribed queues wake a waiter; a timeout still ends the wait."""
    thread = waiting(pg, ["default"])
    pg.enqueue(EnqueueParams(jobs=[new_job(0, queue="other")], now=0.0))
    thread.join(NOT_WOKEN)  # a wake-up for "other" would end the hour-long wait by now
    assert thread.is_alive(), "work in another queue woke the waiter"
    pg.enqueue(EnqueueParams(jobs=[new_job(1)], now=0.0))
    thread.join(JOIN)
    assert not thread.is_alive()
    short = threading.Thread(
        target=pg.wait, args=(WaitParams(queues=["default"], timeout=0.2),), daemon=True
    )
    short.start()
    short.join(JOIN)
    assert not short.is_alive(), "a wait with nothing arriving did not end by its timeout"
