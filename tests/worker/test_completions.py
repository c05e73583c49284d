"""The ack buffer: successes are acked together, and keep their slots until they are."""

from __future__ import annotations

import threading

import pytest

from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    DequeueParams,
    EnqueueParams,
    StatsParams,
)
from fairq.job import Lease
from fairq.model import ReferenceModel
from fairq.worker.completions import Completions
from fairq.worker.running import RunningJobs

from .helpers import new_job


class CountingModel(ReferenceModel):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        self.batches.append(list(params.tokens))
        return super().ack_many(params)


def _store(jobs: int) -> CountingModel:
    store = CountingModel()
    new = [new_job(f"j{n}") for n in range(jobs)]
    store.enqueue(EnqueueParams(jobs=new, now=0.0))
    return store


def _all_taken(jobs: int) -> tuple[CountingModel, RunningJobs, list[Lease], Completions]:
    """A store of ``jobs`` jobs, all dequeued by a worker of as many slots, whose ack buffer
    is flushed only when asked (its timer is a minute)."""
    store = _store(jobs)
    running = RunningJobs(jobs)
    params = DequeueParams(queues=["default"], worker_id="w", now=0.0, limit=jobs)
    buffer = Completions(store, running, clock=lambda: 1.0, max_wait=60.0)
    return store, running, store.dequeue(params).leases, buffer


def test_successes_hold_their_slots_until_one_ack_many_stores_them() -> None:
    store, running, leases, buffer = _all_taken(3)
    try:
        for lease in leases[:2]:
            entry = running.add(lease)
            assert running.claim(lease.token) is entry
            buffer.add(entry)
        assert running.free() == 1  # buffered successes are still busy
        assert store.stats(StatsParams())[0].running == 3
        buffer.flush()
        assert running.free() == 3
        assert store.batches == [[leases[0].token, leases[1].token]]
        assert store.stats(StatsParams())[0].succeeded == 2
    finally:
        buffer.close()


def test_lost_tokens_free_their_slots_too() -> None:
    store, running, leases, buffer = _all_taken(2)
    store.ack_many(AckManyParams(tokens=[leases[1].token], now=0.5))  # acked elsewhere: lost
    store.batches.clear()
    try:
        for lease in leases:
            entry = running.add(lease)
            running.claim(lease.token)
            buffer.add(entry)
        buffer.flush()
        assert store.batches == [[leases[0].token, leases[1].token]]
        assert running.wait_until_empty(5.0)
    finally:
        buffer.close()


def test_the_flusher_stores_a_lone_success_after_max_wait() -> None:
    store = _store(1)
    running = RunningJobs(4)
    (lease,) = store.dequeue(DequeueParams(queues=["default"], worker_id="w", now=0.0)).leases
    buffer = Completions(store, running, clock=lambda: 1.0, max_wait=0.002)
    try:
        entry = running.add(lease)
        running.claim(lease.token)
        buffer.add(entry)
        assert running.wait_until_empty(5.0)
        assert store.batches == [[lease.token]]
    finally:
        buffer.close()


def test_every_slot_waiting_for_its_ack_makes_room() -> None:
    store, running, leases, buffer = _all_taken(3)
    try:
        entries = [running.add(lease) for lease in leases]
        assert not running.has_room()
        buffer.add(entries[0])
        buffer.add(entries[1])
        assert not running.has_room()  # a job still runs: its end (or the timer) comes first
        buffer.add(entries[2])
        assert running.has_room()  # every slot can be had by storing acks
        batch = buffer.take()
        assert not running.has_room()  # taken: on their way to the store
        buffer.store_with(batch, lambda acks: (store.ack_many(acks), None))
        assert running.free() == 3 and running.has_room()
    finally:
        buffer.close()


def test_a_batch_stored_with_a_call_that_fails_is_kept_and_counted_again() -> None:
    store, running, leases, buffer = _all_taken(2)

    def unreachable(acks: AckManyParams) -> tuple[AckManyResult, None]:
        raise ConnectionError("store down")

    try:
        for lease in leases:
            buffer.add(running.add(lease))
        batch = buffer.take()
        with pytest.raises(ConnectionError):
            buffer.store_with(batch, unreachable)
        assert running.has_room() and running.free() == 0  # kept: still acks to store
        assert store.stats(StatsParams())[0].running == 2
        buffer.store_with(buffer.take(), lambda acks: (store.ack_many(acks), None))
        assert store.stats(StatsParams())[0].succeeded == 2 and running.free() == 2
    finally:
        buffer.close()


def test_acks_due_wake_only_a_fetch_loop_waiting_for_room() -> None:
    _, running, leases, buffer = _all_taken(2)
    try:
        entries = [running.add(lease) for lease in leases]
        assert not running.acks_due()  # nothing settled
        buffer.add(entries[0])
        assert not running.acks_due()  # nobody waits for room: the ack thread stores them
        waiter = threading.Thread(target=running.wait_for_room, daemon=True)
        waiter.start()
        while not running.acks_due():  # True once the waiter is parked
            waiter.join(0.001)
        waiter.join(5.0)
        assert not waiter.is_alive()  # woken, though a job still runs
        assert running.has_room()
        assert buffer.take() == [entries[0]]
        assert not running.has_room()  # taken: waiting for room again needs a free slot
    finally:
        buffer.close()


def test_the_flusher_leaves_acks_due_to_a_fetch_loop_waiting_for_room() -> None:
    """The acks go with the waiting loop's refill, in one ``ack_and_dequeue``, not in an
    ``ack_many`` of their own followed by its dequeue."""
    store = _store(3)
    running = RunningJobs(2)
    params = DequeueParams(queues=["default"], worker_id="w", now=0.0, limit=2)
    leases = store.dequeue(params).leases
    buffer = Completions(store, running, clock=lambda: 1.0, max_wait=0.2)
    try:
        entries = [running.add(lease) for lease in leases]
        running.claim(leases[0].token)
        waiter = threading.Thread(target=running.wait_for_room, daemon=True)
        waiter.start()
        while not running._parked:  # the fetch loop's stand-in waits for room
            waiter.join(0.001)
        buffer.add(entries[0])
        waiter.join(5.0)
        assert not waiter.is_alive()  # woken by the timer, though a job still runs
        batch = buffer.take()
        assert batch == [entries[0]] and store.batches == []  # the flusher stored nothing
        refill = buffer.store_with(
            batch,
            lambda acks: _both(store, AckAndDequeueParams(acks=acks, dequeue=params)),
        )
        assert [lease.job_id for lease in refill] == ["j2"]
        assert running.free() == 1 and store.stats(StatsParams())[0].succeeded == 1
    finally:
        buffer.close()


def _both(store: ReferenceModel, params: AckAndDequeueParams) -> tuple[AckManyResult, list[Lease]]:
    result: AckAndDequeueResult = store.ack_and_dequeue(params)
    return result.acks, list(result.dequeue.leases)
