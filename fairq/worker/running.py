"""The leases a worker holds right now: its concurrency slots, shared by every worker thread.

A lease is in the table from the moment it is dequeued until its outcome is stored (a success
waits in the completion buffer for its batched ack, keeping its slot). Exactly one
party *claims* it: the job's runner (to ack or fail it) or shutdown (to release it). Whoever
claims it owns the outcome, so a job that ends while it is being handed back is never acked as
well (a released job gets the same lease token again on its next run). The slot stays taken
until the claimant calls ``done``, so shutdown can wait for outcomes still being stored.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fairq.job import Lease


@dataclass
class Running:
    """One held lease and how to interrupt its job (async jobs only)."""

    lease: Lease
    started: float = field(default_factory=time.monotonic)
    cancel: Callable[[], object] | None = None
    claimed: bool = False
    duration: float = 0.0  # seconds the job ran, once it ended
    deadline: float = 0.0  # the lease's deadline as last extended (store time)

    def __post_init__(self) -> None:
        self.deadline = self.lease.deadline


class RunningJobs:
    """Held leases, bounded by ``capacity``. Waiters wake at once when a slot frees or on stop."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._jobs: dict[str, Running] = {}
        self._cond = threading.Condition(threading.Lock())
        self._closed = False  # no more slots are handed out (the worker stops taking jobs)
        self._abandoned = False  # stop waiting for running jobs (hand them back now)
        # Set when the heartbeat must look again: a lease shorter than every lease it last
        # saw (see ``watch``), which is any lease when it saw none; not on every add, nor
        # when leases come and go between its looks (its timer covers those).
        self.changed = threading.Event()
        self._shortest = math.inf  # the shortest lease_timeout the heartbeat last saw
        # Held leases whose jobs succeeded and wait in the ack buffer. Once every slot is one,
        # the fetch loop acks and refills them in one call: fewer, bigger calls cost the store
        # and the worker less per job than waking at half the slots (benchmarks/
        # redis_drain_cost.py). Until then a free slot wakes it, and the ack buffer's 2 ms
        # timer stores acks that wait.
        self._settled = 0
        # Settled slots that wake the fetch loop: every slot, or any once the ack buffer's
        # timer has fired while the loop waits here (``acks_due``).
        self._wake_at = capacity
        self._parked = False  # the fetch loop waits in ``wait_for_room``

    def add(self, lease: Lease) -> Running:
        entry = Running(lease)
        with self._cond:
            if lease.lease_timeout < self._shortest:
                self.changed.set()
            self._jobs[lease.token] = entry
        return entry

    def extended(self, deadlines: Mapping[str, float]) -> None:
        """Note the new deadlines a heartbeat gave (to say, if a lease is lost, by how long
        it was missed)."""
        with self._cond:
            for token, deadline in deadlines.items():
                entry = self._jobs.get(token)
                if entry is not None:
                    entry.deadline = deadline

    def deadline(self, lease: Lease) -> float:
        """The lease's deadline as last extended (its first one once it is gone)."""
        with self._cond:
            entry = self._jobs.get(lease.token)
            return lease.deadline if entry is None else entry.deadline

    def claim(self, token: str) -> Running | None:
        """Take charge of a lease's outcome; ``None`` when someone else already has."""
        with self._cond:
            entry = self._jobs.get(token)
            if entry is None or entry.claimed:
                return None
            entry.claimed = True
            return entry

    def claim_all(self) -> list[Running]:
        """Claim every lease nobody has claimed yet (at shutdown, to hand them back)."""
        with self._cond:
            entries = [entry for entry in self._jobs.values() if not entry.claimed]
            for entry in entries:
                entry.claimed = True
            return entries

    def done(self, token: str) -> None:
        """The claimed lease's outcome is stored (or given up on): free its slot."""
        self.done_many([token])

    def done_many(self, tokens: list[str]) -> None:
        """As ``done`` for each, with one wake-up: the fetch loop sees every freed slot at
        once, and asks for them all in one dequeue."""
        with self._cond:
            for token in tokens:
                self._jobs.pop(token, None)
            self._cond.notify_all()

    def settle(self, count: int = 1) -> None:
        """Jobs succeeded and their acks wait in the buffer: their slots can be had by
        storing the acks, which the fetch loop does in the same call as its dequeue. The
        loop is woken once every slot is one (``has_room``)."""
        with self._cond:
            self._settled += count
            if self._settled >= self.capacity:
                self._cond.notify_all()

    def unsettle(self, count: int) -> None:
        """``count`` acks left the buffer to be stored (their slots free once ``done``)."""
        with self._cond:
            self._settled -= count
            self._wake_at = self.capacity

    def acks_due(self) -> bool:
        """The ack buffer's timer fired. If the fetch loop waits for room, wake it: it stores
        the acks with its refill of their slots in one call (``ack_and_dequeue``), where the
        ack thread's own ``ack_many`` would be followed by the loop's ``dequeue``. False when
        it does not wait here (it waits for new work, or is in a call): store them yourself."""
        with self._cond:
            if not self._parked or self._settled == 0:
                return False
            self._wake_at = 1
            self._cond.notify_all()
            return True

    def watch(self) -> list[Lease]:
        """The held leases, for the heartbeat: from now on ``changed`` is set only by a lease
        shorter than all of these (its beats must come sooner), or by the first one after none."""
        with self._cond:
            leases = [entry.lease for entry in self._jobs.values()]
            self._shortest = min((lease.lease_timeout for lease in leases), default=math.inf)
            return leases

    def unclaimed(self, tokens: set[str]) -> set[str]:
        """Those of ``tokens`` whose job is still running: nobody has taken its outcome."""
        with self._cond:
            return {t for t in tokens if t in self._jobs and not self._jobs[t].claimed}

    def __len__(self) -> int:
        with self._cond:
            return len(self._jobs)

    def close(self) -> None:
        """Hand out no more slots: ``free`` is 0 and ``wait_for_room`` returns at once."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def abandon(self) -> None:
        """Stop waiting for running jobs: ``wait_until_empty`` returns at once from now on."""
        with self._cond:
            self._abandoned = True
            self._cond.notify_all()

    def wait_for_room(self) -> None:
        """Block until ``has_room`` (one thread at a time: the fetch loop)."""
        with self._cond:
            self._parked = True
            try:
                self._cond.wait_for(self._has_room)
            finally:
                self._parked = False

    def has_room(self) -> bool:
        """A slot is free, or every slot can be freed by storing its ack, or acks wait that
        are due (``acks_due``); or closed."""
        with self._cond:
            return self._has_room()

    def _has_room(self) -> bool:
        return self._closed or self._settled >= self._wake_at or len(self._jobs) < self.capacity

    def free(self) -> int:
        """Free slots right now (0 once closed)."""
        with self._cond:
            return 0 if self._closed else max(self.capacity - len(self._jobs), 0)

    def wait_until_empty(self, timeout: float) -> bool:
        """Block until no lease is held, ``timeout`` passes, or abandoned; True when empty."""
        with self._cond:
            self._cond.wait_for(lambda: self._abandoned or not self._jobs, timeout=timeout)
            return not self._jobs
