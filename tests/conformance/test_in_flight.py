"""A queue's cap on leased jobs (``QueueSettings.max_in_flight``): all tenants and workers
together never hold more than it, while the fair order of who gets the next job is unchanged."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

import pytest

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    Backend,
    DequeueParams,
    FailParams,
    GetQueueParams,
    MaintainParams,
    QueueSettings,
    ReleaseParams,
    SetQueueParams,
    StatsParams,
)
from fairq.errors import ConfigError
from fairq.job import Lease

from .helpers import Q, ack, enqueue, new_job, new_jobs, set_tenant, take
from .test_waiting import BOUND, LONG_WAIT

OTHER = "other"


def cap_queue(backend: Backend, cap: int | None, now: float = 0.0, queue: str = Q) -> None:
    """Set the queue's cap, keeping its other settings."""
    current = backend.get_queue(GetQueueParams(queue=queue))
    settings = replace(current, max_in_flight=cap)
    backend.set_queue(SetQueueParams(settings=settings, now=now))


def in_flight(backend: Backend, queue: str = Q) -> int:
    return sum(row.running for row in backend.stats(StatsParams(queue=queue)))


def backlog(backend: Backend, per_tenant: int = 5) -> None:
    """Tenants a, b, c with ``per_tenant`` ready jobs each, enqueued in that order."""
    for k, tenant in enumerate("abc"):
        start = k * per_tenant
        enqueue(backend, new_jobs(tenant, range(start, start + per_tenant)))


def test_a_full_queue_hands_out_nothing_while_tenants_have_ready_jobs(backend: Backend) -> None:
    cap_queue(backend, 2)
    backlog(backend)
    assert [lease.tenant for lease in take(backend, limit=10)] == ["a", "b"]
    assert take(backend) == []
    assert take(backend, now=5.0, limit=3) == []
    assert in_flight(backend) == 2
    assert sum(row.ready for row in backend.stats(StatsParams(queue=Q))) == 13


def test_a_batch_gets_at_most_the_room_left(backend: Backend) -> None:
    cap_queue(backend, 4)
    backlog(backend)
    assert len(take(backend, limit=1)) == 1
    assert len(take(backend, limit=10)) == 3
    assert take(backend, limit=10) == []


def test_each_ended_lease_frees_room_for_the_next_job_in_fair_order(
    make_backend: Callable[[], Backend],
) -> None:
    """The capped store hands out exactly what an uncapped one does when asked for as many as
    the capped one had room for: the cap changes how many, never which."""
    capped, free = make_backend(), make_backend()
    cap_queue(capped, 3)
    for store in (capped, free):
        set_tenant(store, "b", weight=2.0)
        backlog(store, per_tenant=6)
    held: list[Lease] = []
    now = 0.0
    for step in range(12):
        got = take(capped, now, limit=10)
        assert len(held) + len(got) <= 3
        expected = take(free, now, limit=len(got)) if got else []
        assert [lease.job_id for lease in got] == [lease.job_id for lease in expected]
        held += got
        if not held:
            break
        now += 1.0
        done = held.pop(step % len(held))  # runs for exactly its estimate: tags unchanged
        for store in (capped, free):
            ack(store, done, now)
    assert in_flight(capped) <= 3
    assert len({lease.job_id for lease in held}) == len(held)


def test_fail_and_release_free_room_too(backend: Backend) -> None:
    cap_queue(backend, 2)
    backlog(backend)
    first, second = take(backend, limit=5)
    backend.fail(FailParams(token=first.token, now=1.0, error="boom", retry_at=None))
    (third,) = take(backend, 1.0, limit=5)
    backend.release(ReleaseParams(token=second.token, now=2.0))
    assert len(take(backend, 2.0, limit=5)) == 1
    assert take(backend, 2.0) == []
    assert in_flight(backend) == 2
    assert third.token not in (first.token, second.token)


def test_an_expired_lease_frees_room(backend: Backend) -> None:
    cap_queue(backend, 1)
    enqueue(backend, [new_job(1, "a", lease=5.0), new_job(2, "b", lease=5.0)])
    (first,) = take(backend, limit=5)
    assert take(backend, 4.0) == []
    result = backend.maintain(MaintainParams(now=5.0, queues=[Q]))
    assert [lost.job_id for lost in result.expired] == [first.job_id]
    (second,) = take(backend, 5.0, limit=5)
    assert second.job_id != first.job_id
    assert in_flight(backend) == 1


def test_a_dequeue_whose_maintenance_expires_a_lease_uses_the_room(backend: Backend) -> None:
    cap_queue(backend, 1)
    enqueue(backend, [new_job(1, "a", lease=5.0), new_job(2, "b", lease=5.0)])
    (first,) = take(backend, limit=5)
    result = backend.dequeue(DequeueParams(queues=[Q], worker_id="w2", now=6.0, limit=5))
    assert [lost.job_id for lost in result.expired] == [first.job_id]
    assert [lease.job_id for lease in result.leases] == ["j2"]


def test_acks_of_ack_and_dequeue_free_room_for_its_dequeue(backend: Backend) -> None:
    cap_queue(backend, 2)
    backlog(backend)
    held = take(backend, limit=5)
    assert len(held) == 2
    result = backend.ack_and_dequeue(
        AckAndDequeueParams(
            acks=AckManyParams(tokens=[held[0].token], now=1.0),
            dequeue=DequeueParams(queues=[Q], worker_id="w1", now=1.0, limit=5),
        )
    )
    assert list(result.acks.acked) == [held[0].token]
    assert len(result.dequeue.leases) == 1
    assert in_flight(backend) == 2


def test_a_full_queue_is_skipped_for_the_next_queue_asked(backend: Backend) -> None:
    cap_queue(backend, 1)
    enqueue(backend, new_jobs("a", range(3)))
    enqueue(backend, new_jobs("a", range(3, 6), queue=OTHER))
    got = take(backend, limit=3, queues=(Q, OTHER))
    assert [lease.queue for lease in got] == [Q, OTHER, OTHER]
    assert [lease.queue for lease in take(backend, limit=3, queues=(Q, OTHER))] == [OTHER]
    assert in_flight(backend) == 1
    assert in_flight(backend, OTHER) == 3


def test_the_cap_is_per_queue(backend: Backend) -> None:
    cap_queue(backend, 1, queue=OTHER)
    enqueue(backend, new_jobs("a", range(3)))
    enqueue(backend, new_jobs("a", range(3, 6), queue=OTHER))
    assert len(take(backend, limit=5)) == 3
    assert len(take(backend, limit=5, queues=(OTHER,))) == 1


def test_tenant_caps_still_apply_under_the_queue_cap(backend: Backend) -> None:
    cap_queue(backend, 4)
    backlog(backend)
    set_tenant(backend, "a", max_running=1)
    assert [lease.tenant for lease in take(backend, limit=10)] == ["a", "b", "c", "b"]
    assert take(backend) == []


def test_set_and_get_queue_keep_the_cap_and_every_other_setting(backend: Backend) -> None:
    settings = QueueSettings(
        queue=Q, weight=2.0, max_running=3, half_life=30.0, max_debt=5.0, max_in_flight=7
    )
    backend.set_queue(SetQueueParams(settings=settings, now=0.0))
    assert backend.get_queue(GetQueueParams(queue=Q)) == settings
    assert backend.get_queue(GetQueueParams(queue=OTHER)).max_in_flight is None
    backend.set_queue(SetQueueParams(settings=replace(settings, max_in_flight=None), now=0.0))
    assert backend.get_queue(GetQueueParams(queue=Q)) == replace(settings, max_in_flight=None)


def test_lowering_the_cap_holds_new_jobs_back_until_enough_leases_end(backend: Backend) -> None:
    backlog(backend)
    held = take(backend, limit=4)
    assert len(held) == 4
    cap_queue(backend, 2, now=1.0)
    assert in_flight(backend) == 4  # running jobs are never taken back
    assert take(backend, 1.0, limit=5) == []
    ack(backend, held[0], 2.0)
    ack(backend, held[1], 2.0)
    assert take(backend, 2.0, limit=5) == []  # 2 leased: still full
    ack(backend, held[2], 3.0)
    assert len(take(backend, 3.0, limit=5)) == 1


def test_raising_or_removing_the_cap_hands_out_at_once(backend: Backend) -> None:
    cap_queue(backend, 1)
    backlog(backend)
    assert len(take(backend, limit=5)) == 1
    cap_queue(backend, 3, now=1.0)
    assert len(take(backend, 1.0, limit=5)) == 2
    cap_queue(backend, None, now=2.0)
    assert len(take(backend, 2.0, limit=5)) == 5
    cap_queue(backend, 9, now=3.0)  # set again while 8 are leased: counted from the jobs
    assert len(take(backend, 3.0, limit=5)) == 1
    assert in_flight(backend) == 9


@pytest.mark.parametrize("bad", [0, -1, 2**31, 1.5, "3", True])
def test_a_bad_cap_is_refused_naming_the_setting(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_in_flight"):
        QueueSettings(queue=Q, max_in_flight=bad)  # type: ignore[arg-type]


def free_room(backend: Backend, held: Lease, how: str) -> None:
    """End the lease ``held`` (dispatched at 100 with a 30 s lease) as ``how`` says."""
    if how == "ack":
        ack(backend, held, 101.0)
    elif how == "fail":
        backend.fail(FailParams(token=held.token, now=101.0, error="boom", retry_at=None))
    elif how == "release":
        backend.release(ReleaseParams(token=held.token, now=101.0))
    else:
        assert backend.maintain(MaintainParams(now=131.0, queues=[Q])).expired


@pytest.mark.parametrize("how", ["ack", "fail", "release", "expiry"])
def test_a_waiter_on_a_full_queue_is_woken_when_a_lease_ends(backend: Backend, how: str) -> None:
    """The waiter's wait is an hour long, so only a wake-up from the end of the lease can let
    it take a job in time. It must sleep, not spin, while the queue is full: a few dequeues at
    most (a store may wake spuriously), never one per turn of a loop."""
    cap_queue(backend, 1)
    enqueue(backend, [new_job(1, "a"), new_job(2, "b")], now=100.0)
    (held,) = take(backend, now=100.0, limit=5)
    taken: list[Lease] = []
    asked = [0]
    asking = threading.Event()

    def take_when_room() -> None:
        while not taken and asked[0] < 1000:
            asked[0] += 1
            asking.set()
            params = DequeueParams(queues=[Q], worker_id="w2", now=100.0, wait=LONG_WAIT)
            taken.extend(backend.dequeue(params).leases)

    taker = threading.Thread(target=take_when_room, daemon=True)
    taker.start()
    assert asking.wait(BOUND)
    free_room(backend, held, how)
    taker.join(BOUND)
    assert not taker.is_alive(), f"the {how} did not wake the waiter of the full queue"
    assert len(taken) == 1
    assert asked[0] <= 5, f"the waiter asked {asked[0]} times while the queue was full"
