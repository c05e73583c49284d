"""Acks: successes keep their slots until the fetch loop stores them together, and an ack the
store did not take is tried again, never dropped without a word."""

from __future__ import annotations

import logging

import pytest

from fairq.contract import AckManyParams, AckManyResult, DequeueParams, EnqueueParams, StatsParams
from fairq.job import Lease
from fairq.model import ReferenceModel
from fairq.worker.completions import Acks
from fairq.worker.running import RunningJobs

from .helpers import new_job


class CountingModel(ReferenceModel):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        self.batches.append(list(params.tokens))
        return super().ack_many(params)


def _all_taken(
    jobs: int, slots: int | None = None, ack_wait: float = 60.0
) -> tuple[CountingModel, RunningJobs, list[Lease], Acks]:
    """A store of ``jobs`` jobs, all dequeued by a worker of ``slots`` slots (as many by
    default), whose acks fall due after ``ack_wait`` (a minute: only when a test asks)."""
    store = CountingModel()
    store.enqueue(EnqueueParams(jobs=[new_job(f"j{n}") for n in range(jobs)], now=0.0))
    running = RunningJobs(slots or jobs, ack_wait=ack_wait)
    params = DequeueParams(queues=["default"], worker_id="w", now=0.0, limit=jobs)
    return store, running, store.dequeue(params).leases, Acks(store, running, clock=lambda: 1.0)


def test_successes_hold_their_slots_until_one_ack_many_stores_them() -> None:
    store, running, leases, acks = _all_taken(3)
    for lease in leases[:2]:
        entry = running.add(lease)
        assert running.claim(lease.token) is entry
        assert running.succeeded(entry)
    assert running.free() == 1  # buffered successes are still busy
    assert store.stats(StatsParams())[0].running == 3
    assert acks.store_due()
    assert running.free() == 3
    assert store.batches == [[leases[0].token, leases[1].token]]
    assert store.stats(StatsParams())[0].succeeded == 2


def test_lost_tokens_free_their_slots_too() -> None:
    store, running, leases, acks = _all_taken(2)
    store.ack_many(AckManyParams(tokens=[leases[1].token], now=0.5))  # acked elsewhere: lost
    store.batches.clear()
    for lease in leases:
        entry = running.add(lease)
        running.claim(lease.token)
        running.succeeded(entry)
    assert acks.store_due()
    assert store.batches == [[leases[0].token, leases[1].token]]
    assert running.wait_until_empty(5.0)


def test_a_lone_success_falls_due_though_every_other_slot_still_runs() -> None:
    """The fetch loop, waiting for room, wakes for it once it has waited ``ack_wait``."""
    _, running, leases, _ = _all_taken(2, ack_wait=0.002)
    first, _ = [running.add(lease) for lease in leases]
    running.claim(first.lease.token)
    running.succeeded(first)
    assert not running.has_room()
    running.wait_for_room()  # returns: the ack is due
    assert running.take_acks() == [first]


def test_every_slot_waiting_for_its_ack_makes_room() -> None:
    store, running, leases, acks = _all_taken(3)
    entries = [running.add(lease) for lease in leases]
    assert not running.has_room()
    running.succeeded(entries[0])
    running.succeeded(entries[1])
    assert not running.has_room()  # a job still runs: its end (or the ack's age) comes first
    running.succeeded(entries[2])
    assert running.has_room()  # every slot can be had by storing acks
    batch = running.take_acks()
    assert not running.has_room()  # taken: on their way to the store
    acks.store_with(batch, lambda params: (store.ack_many(params), None))
    assert running.free() == 3 and running.has_room()


def test_acks_the_store_did_not_take_are_kept_and_fall_due_again() -> None:
    store, running, leases, acks = _all_taken(2)

    def unreachable(params: AckManyParams) -> tuple[AckManyResult, None]:
        raise ConnectionError("store down")

    for lease in leases:
        running.succeeded(running.add(lease))
    with pytest.raises(ConnectionError):
        acks.store_with(running.take_acks(), unreachable)
    assert running.has_room() and running.free() == 0  # kept: still acks to store
    assert store.stats(StatsParams())[0].running == 2
    assert running.wait_for_acks(lambda: False)  # due again after the back-off
    assert acks.store_due()
    assert store.stats(StatsParams())[0].succeeded == 2 and running.free() == 2


def test_once_sealed_an_ack_is_refused_and_one_that_fails_is_given_up_loudly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, running, leases, acks = _all_taken(2)
    first, second = [running.add(lease) for lease in leases]
    running.succeeded(first)
    batch = running.take_acks()
    running.seal()
    assert not running.succeeded(second)  # the runner logs it and frees the slot
    assert running.wait_for_acks_or_seal() is False  # sealed, none left: the fetch loop ends

    def unreachable(params: AckManyParams) -> tuple[AckManyResult, None]:
        raise ConnectionError("store down")

    with caplog.at_level(logging.ERROR, logger="fairq.worker"), pytest.raises(ConnectionError):
        acks.store_with(batch, unreachable)
    assert running.take_acks() == []  # nobody would store it later: given up, and said so
    assert any(first.lease.job_id in r.getMessage() for r in caplog.records)
    assert running.free() == 1  # its slot is free; the second one's is the runner's to free
