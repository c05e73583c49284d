"""The lease keeper every lease holder renews through (the worker's heartbeat, the relayed runs,
the relay's holds, the peers' tenant slots): woken only when it must renew sooner, a loss
reported once and only for what is still held, and a forked child's leases renewed by a thread
of its own."""

from __future__ import annotations

import os
import select
import threading
from typing import Any

from fairq.worker.keeper import LeaseKeeper

from .helpers import DEADLINE


class CountingCondition(threading.Condition):
    """A condition that counts its wake-ups (the keeper's thread is woken by notify_all)."""

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.wakeups = 0

    def notify_all(self) -> None:
        self.wakeups += 1
        super().notify_all()


def test_the_keeper_is_woken_only_by_a_first_or_a_shorter_lease() -> None:
    """Waking it on every lease would cost a thread switch per job for nothing: a lease as long
    as those it holds needs no earlier renewal."""
    keeper: LeaseKeeper[str] = LeaseKeeper(lambda held: None, name="test-keeper")
    condition = keeper._changed = CountingCondition()
    try:
        keeper.hold("first", "first", 30.0)  # starts the thread, which finds it
        keeper.hold("same", "same", 30.0)
        assert condition.wakeups == 0
        keeper.hold("shorter", "shorter", 10.0)
        assert condition.wakeups == 1
        keeper.take_all()
        keeper.hold("after-none", "after-none", 60.0)  # the thread waits for a first lease
        assert condition.wakeups == 2
    finally:
        keeper.stop()


def test_a_lost_lease_is_reported_once_and_only_while_held() -> None:
    renewed: list[set[str]] = []
    lost: list[list[str]] = []
    twice = threading.Event()

    def renew(held: dict[str, str]) -> list[str]:
        renewed.append(set(held))
        if len(renewed) == 1:
            keeper.drop("ended")  # its run ended while this renewal was under way
        if len(renewed) == 2:
            twice.set()
        return ["lost", "ended"]  # the store holds neither

    keeper: LeaseKeeper[str] = LeaseKeeper(renew, name="test-keeper", lost=lost.append, every=0.01)
    for token in ("lost", "ended", "kept"):
        keeper.hold(token, f"item-{token}", 60.0)
    try:
        assert twice.wait(DEADLINE)
    finally:
        keeper.stop()
    assert renewed[0] == {"lost", "ended", "kept"}
    assert renewed[1] == {"kept"}  # a lost lease is renewed no more
    assert lost == [["item-lost"]]  # once; the ended one was not held any more: not lost


def test_a_stopped_keeper_renews_nothing_more() -> None:
    calls: list[Any] = []
    keeper: LeaseKeeper[str] = LeaseKeeper(calls.append, name="test-keeper", every=0.01)
    keeper.stop()
    keeper.hold("late", "late", 0.03)  # held after the stop: no thread starts
    assert keeper._thread is None and calls == []


def test_a_forked_child_renews_its_own_leases_from_a_thread_of_its_own() -> None:
    """A prefork pool's child or an RQ work horse: the parent's thread did not cross the fork."""
    read, write = os.pipe()

    def renew(held: dict[str, str]) -> None:
        line = f"{os.getpid()} {threading.current_thread().name} {sorted(held)}\n"
        os.write(write, line.encode())

    keeper: LeaseKeeper[str] = LeaseKeeper(renew, name="test-keeper", every=0.01)
    keeper.hold("parent", "parent", 60.0)
    keeper.drop("parent")  # the parent's thread sleeps: it holds nothing
    child = os.fork()
    if child == 0:  # pragma: no cover (the child)
        try:
            keeper.hold("child", "child", 60.0)
            threading.Event().wait(DEADLINE)
        finally:
            os._exit(0)
    try:
        ready, _, _ = select.select([read], [], [], DEADLINE)
        assert ready, "the child's renewal"
        pid, name, held = os.read(read, 200).decode().splitlines()[0].split(" ", 2)
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
        keeper.stop()
        os.close(read)
        os.close(write)
    assert int(pid) == child and name == "test-keeper" and held == "['child']"
