"""Batches equal singles: a dequeue of ``limit`` jobs gives what ``limit`` single dequeues
would, ``ack_many`` does what single acks in the same order would, and ``ack_and_dequeue``
what ``ack_many`` then ``dequeue`` would."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    Backend,
    DequeueParams,
    QueueSettings,
    SetQueueParams,
    StatsParams,
)

from .helpers import Q, enqueue, new_job, new_jobs, set_tenant, snapshot, stat, take


def busy_store(backend: Backend) -> Backend:
    """Several tenants with weights, a cap, priorities, a delayed job, and two queues."""
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue="other", weight=2.0), now=0.0))
    enqueue(backend, new_jobs("a", range(10)))
    enqueue(backend, new_jobs("b", range(10, 20), cost=3.0))
    enqueue(backend, [new_job(20 + n, "c", priority=n % 3) for n in range(10)])
    enqueue(backend, new_jobs("d", range(30, 40), queue="other"))
    enqueue(backend, [new_job(40, "a", run_at=1.0)])
    set_tenant(backend, "b", weight=2.0)
    set_tenant(backend, "c", max_running=2)
    return backend


def test_batch_dequeue_equals_single_dequeues(make_backend: Callable[[], Backend]) -> None:
    batched, single = busy_store(make_backend()), busy_store(make_backend())
    for now, limit in [(0.0, 7), (0.5, 1), (1.0, 12), (2.0, 50)]:
        queues = (Q, "other") if now else (Q,)
        expected = [lease for _ in range(limit) for lease in take(single, now, 1, queues)]
        assert take(batched, now, limit, queues) == expected


def test_queues_are_tried_in_the_order_given(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    enqueue(backend, new_jobs("a", range(2, 4), queue="other"))
    assert [lease.queue for lease in take(backend, 0.0, 3, ("other", Q))] == [
        "other",
        "other",
        "default",
    ]


def _ack_many(backend: Backend, tokens: list[str], now: float) -> tuple[list[str], list[str]]:
    """(acked, lost) of one ack_many."""
    result = backend.ack_many(AckManyParams(tokens=tokens, now=now))
    return list(result.acked), list(result.lost)


def _ack_singly(backend: Backend, tokens: list[str], now: float) -> tuple[list[str], list[str]]:
    """(acked, lost) of single acks in order (one ack_many per token)."""
    acked: list[str] = []
    lost: list[str] = []
    for token in tokens:
        result = backend.ack_many(AckManyParams(tokens=[token], now=now))
        acked += result.acked
        lost += result.lost
    return acked, lost


def test_ack_many_equals_single_acks_in_order(make_backend: Callable[[], Backend]) -> None:
    """Same answers, stats, jobs and next dequeues, bit for bit, as acking one by one."""
    batched, single = busy_store(make_backend()), busy_store(make_backend())
    ids = [f"j{n}" for n in range(41)]
    for now, limit, queues in [(0.0, 9, (Q,)), (0.7, 6, (Q, "other")), (1.3, 12, (Q, "other"))]:
        leases = take(batched, now, limit, queues)
        assert take(single, now, limit, queues) == leases
        # Acked out of dispatch order, with different run times (so tags move by odd amounts).
        tokens = [lease.token for lease in reversed(leases)]
        at = now + 0.123456789
        assert _ack_many(batched, tokens, at) == _ack_singly(single, tokens, at)
        assert snapshot(batched, ids) == snapshot(single, ids)
    stats_at = StatsParams(now=5.0)
    assert batched.stats(stats_at) == single.stats(stats_at)
    assert take(batched, 2.0, 50, (Q, "other")) == take(single, 2.0, 50, (Q, "other"))


def test_ack_many_reports_expired_unknown_and_repeated_tokens_lost(
    make_backend: Callable[[], Backend],
) -> None:
    batched, single = make_backend(), make_backend()
    for backend in (batched, single):
        enqueue(backend, new_jobs("a", range(3)) + new_jobs("b", range(3, 5), lease=1.0))
        set_tenant(backend, "a", max_running=2)
    leases = take(batched, 0.0, 4)
    assert take(single, 0.0, 4) == leases
    short = [lease.token for lease in leases if lease.tenant == "b"]
    held = [lease.token for lease in leases if lease.tenant == "a"]
    assert len(short) == 2 and len(held) == 2
    tokens = [held[0], short[0], "j99:1", held[0], "nonsense", held[1], short[1]]
    result = _ack_many(batched, tokens, 2.0)
    assert result == ([held[0], held[1]], [short[0], "j99:1", held[0], "nonsense", short[1]])
    assert _ack_singly(single, tokens, 2.0) == result
    ids = [f"j{n}" for n in range(5)]
    assert snapshot(batched, ids) == snapshot(single, ids)
    assert stat(batched, "a").succeeded == 2 and stat(batched, "b").succeeded == 0
    # The expired leases are found by the next dequeue's maintenance, as ever.
    assert take(batched, 2.0, 10) == take(single, 2.0, 10)
    assert snapshot(batched, ids) == snapshot(single, ids)


def test_ack_many_of_nothing_changes_nothing(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    take(backend, 0.0, 1)
    before = snapshot(backend, ["j0", "j1"])
    assert _ack_many(backend, [], 1.0) == ([], [])
    assert _ack_many(backend, ["j1:1", "j7:3"], 1.0) == ([], ["j1:1", "j7:3"])
    assert snapshot(backend, ["j0", "j1"]) == before


def test_ack_and_dequeue_equals_ack_many_then_dequeue(make_backend: Callable[[], Backend]) -> None:
    """A capped tenant's finished jobs free its slots for the same call's dequeue."""
    together, apart = busy_store(make_backend()), busy_store(make_backend())
    ids = [f"j{n}" for n in range(41)]
    leases = take(together, 0.0, 9)
    assert take(apart, 0.0, 9) == leases
    for now, queues in [(0.4, (Q,)), (1.1, (Q, "other")), (2.5, ("other", Q))]:
        tokens = [lease.token for lease in reversed(leases)] + ["j99:1"]
        params = DequeueParams(queues=queues, worker_id="w1", now=now, limit=len(leases) + 1)
        both = together.ack_and_dequeue(
            AckAndDequeueParams(acks=AckManyParams(tokens=tokens, now=now), dequeue=params)
        )
        result, leases = both.acks, list(both.dequeue.leases)
        assert (list(result.acked), list(result.lost)) == _ack_many(apart, tokens, now)
        assert list(apart.dequeue(params).leases) == leases
        assert snapshot(together, ids) == snapshot(apart, ids)
    assert any(lease.tenant == "c" for lease in leases)  # the capped tenant was served again
    stats_at = StatsParams(now=5.0)
    assert together.stats(stats_at) == apart.stats(stats_at)


def test_ack_and_dequeue_treats_lost_tokens_and_other_queues_as_ack_many_does(
    make_backend: Callable[[], Backend],
) -> None:
    """Expired, repeated, unknown and stale tokens, and jobs of a queue it does not dequeue
    from, mixed in one call: the same answers and state as ``ack_many`` then ``dequeue``.
    (b's leases end at 2.0, the acks' time, so they are expired for the acks, but not yet
    overdue for the dequeue at 1.9, which finds no maintenance to do.)"""
    together, apart = make_backend(), make_backend()
    for backend in (together, apart):
        enqueue(backend, new_jobs("a", range(4)) + new_jobs("b", range(4, 6), lease=2.0))
        enqueue(backend, new_jobs("d", range(6, 9), queue="other"))
        set_tenant(backend, "a", max_running=2)
    leases = take(together, 0.0, 6, (Q, "other"))
    assert take(apart, 0.0, 6, (Q, "other")) == leases
    held = [lease.token for lease in leases if lease.tenant == "a"]
    short = [lease.token for lease in leases if lease.tenant == "b"]
    elsewhere = [lease.token for lease in leases if lease.queue == "other"]
    assert len(held) == 2 and len(short) == 2 and elsewhere
    stale = held[1].rsplit(":", 1)[0] + ":7"
    tokens = [elsewhere[0], held[0], short[0], "j99:1", held[0], stale, held[1], short[1]]
    params = DequeueParams(queues=(Q,), worker_id="w1", now=1.9, limit=4)
    both = together.ack_and_dequeue(
        AckAndDequeueParams(acks=AckManyParams(tokens=tokens, now=2.0), dequeue=params)
    )
    result, got = both.acks, list(both.dequeue.leases)
    assert (list(result.acked), list(result.lost)) == _ack_many(apart, tokens, 2.0)
    assert list(result.acked) == [elsewhere[0], held[0], held[1]]
    assert got == list(apart.dequeue(params).leases)
    assert any(lease.tenant == "a" for lease in got)  # the capped tenant's slots were freed
    ids = [f"j{n}" for n in range(9)]
    assert snapshot(together, ids) == snapshot(apart, ids)
    stats_at = StatsParams(now=5.0)
    assert together.stats(stats_at) == apart.stats(stats_at)


def test_ack_and_dequeue_does_not_wait(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    (lease,) = take(backend, 0.0, 1)
    params = DequeueParams(queues=(Q,), worker_id="w1", now=1.0, wait=0.5)
    with pytest.raises(ValueError, match="does not wait"):
        backend.ack_and_dequeue(
            AckAndDequeueParams(acks=AckManyParams(tokens=[lease.token], now=1.0), dequeue=params)
        )
    assert stat(backend, "a").running == 1  # nothing was acked
