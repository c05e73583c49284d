"""The leases a worker holds right now: its concurrency slots, shared by every worker thread.

A lease is in the table from the moment it is dequeued until its outcome is stored (a success
waits here for the fetch loop to store its ack with others, keeping its slot). Exactly one
party *claims* it: the job's runner (to ack or fail it) or shutdown (to release it). Whoever
claims it owns the outcome, so a job that ends while it is being handed back is never acked as
well (a released job gets the same lease token again on its next run). The slot stays taken
until the claimant calls ``done``, so shutdown can wait for outcomes still being stored.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fairq.job import Lease
from fairq.results import JobResult
from fairq.worker.keeper import LeaseKeeper

ACK_WAIT = 0.002  # seconds a succeeded job waits, at most, before the fetch loop stores its ack


@dataclass
class Running:
    """One held lease and how to interrupt its job (async jobs only)."""

    lease: Lease
    started: float = field(default_factory=time.monotonic)
    cancel: Callable[[], object] | None = None  # at a shutdown: the job is handed back
    interrupt: Callable[[], object] | None = None  # on a cancel request: the job ends cancelled
    cancel_requested: bool = False  # the job was asked to stop (fairq.current_job())
    result: JobResult | None = None  # its return value, to keep with its ack (fairq/results.py)
    task: asyncio.Task[Any] | None = None  # an async job's task, once started (to interrupt)
    claimed: bool = False
    duration: float = 0.0  # seconds the job ran, once it ended
    succeeded: bool = False  # its ack waits to be stored
    deadline: float = 0.0  # the lease's deadline as last extended (store time)

    def __post_init__(self) -> None:
        self.deadline = self.lease.deadline


class RunningJobs:
    """Held leases, bounded by ``capacity``. Waiters wake at once when a slot frees or on stop."""

    def __init__(self, capacity: int, ack_wait: float = ACK_WAIT) -> None:
        self.capacity = capacity
        self._jobs: dict[str, Running] = {}
        self._cond = threading.Condition(threading.Lock())
        self._closed = False  # no more slots are handed out (the worker stops taking jobs)
        self._abandoned = False  # stop waiting for running jobs (hand them back now)
        self._keeper: LeaseKeeper[Lease] | None = None  # the heartbeat's (``kept_by``)
        # Held leases whose jobs succeeded, waiting for the fetch loop to store their acks. Once
        # every slot is one, it acks and refills them in one call: fewer, bigger calls cost the
        # store and the worker less per job than waking at half the slots (benchmarks/
        # redis_drain_cost.py). Until then a free slot wakes it, or the oldest ack's age.
        self.ack_wait = ack_wait
        self._acks: list[Running] = []
        self._acks_due = math.inf  # monotonic time the fetch loop stores them, alone if it must
        self._acks_not_before = 0.0  # a back-off while the store fails (monotonic; 0: none)
        self._sealed = False  # acks are no longer stored: the worker has shut down

    def add(self, lease: Lease) -> Running:
        entry = Running(lease)
        with self._cond:
            self._jobs[lease.token] = entry
            if self._keeper is not None:
                self._keeper.hold(lease.token, lease, lease.lease_timeout)
        return entry

    def kept_by(self, keeper: LeaseKeeper[Lease]) -> None:
        """Have ``keeper`` renew every lease from now until its outcome is stored (``done``)."""
        with self._cond:
            self._keeper = keeper
            for token, entry in self._jobs.items():
                keeper.hold(token, entry.lease, entry.lease.lease_timeout)

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
                if self._keeper is not None:
                    self._keeper.drop(token)
            self._cond.notify_all()

    # -- acks: buffered here, stored by the fetch loop ----------------------------------------

    def succeeded(self, entry: Running) -> bool:
        """A claimed job succeeded: its ack waits for the fetch loop (its slot is held until
        then). False once acks are no longer stored (``seal``)."""
        with self._cond:
            if self._sealed:
                return False
            entry.succeeded = True
            self._acks.append(entry)
            if len(self._acks) == 1:
                self._acks_due = max(time.monotonic() + self.ack_wait, self._acks_not_before)
                self._cond.notify_all()  # the fetch loop sets its timer
            elif len(self._acks) >= self.capacity:
                self._cond.notify_all()  # every slot can be had by storing its ack
            return True

    def take_acks(self) -> list[Running]:
        """Every buffered ack, for the fetch loop to store (their slots free once ``done``)."""
        with self._cond:
            batch, self._acks = self._acks, []
            self._acks_due = math.inf
            return batch

    def keep_acks(self, batch: list[Running], retry_at: float) -> bool:
        """Acks the store did not take: buffered again, due (with any new ones) at ``retry_at``
        (monotonic). False, keeping nothing, once sealed."""
        with self._cond:
            if self._sealed:
                return False
            self._acks[:0] = batch
            self._acks_due = self._acks_not_before = retry_at
            return True

    def store_answers(self) -> None:
        """Acks were stored: no more back-off."""
        with self._cond:
            self._acks_not_before = 0.0

    def seal(self) -> None:
        """Take no more acks (``succeeded`` says False from now on); those buffered are due
        now: the fetch loop stores them, once (``wait_for_acks_stored`` waits for that)."""
        with self._cond:
            self._sealed = True
            self._acks_due = 0.0
            self._cond.notify_all()

    def wake(self) -> None:
        """Wake the fetch loop to look at what it waits for (``wait_for_acks``'s ``until``)."""
        with self._cond:
            self._cond.notify_all()

    def wait_for_room(self) -> None:
        """Block until a slot is free, every slot waits for its ack, acks are due, or closed
        (the fetch loop)."""
        self._wait(self._has_room, None)

    def wait_for_acks(self, until: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until acks are due (True), ``until()`` holds, or ``timeout`` passed (the fetch
        loop, when it has no slot to fill: it stores them alone)."""
        return self._wait(until, timeout)

    def wait_for_acks_or_seal(self) -> bool:
        """Block until acks are due (True), or sealed with none left (False)."""
        return self._wait(lambda: self._sealed and not self._acks, None)

    def wait_for_acks_stored(self, timeout: float) -> bool:
        """Block until no succeeded job waits for its ack (the fetch loop stores them), or
        ``timeout`` passes; True when none waits. (Even once abandoned: an ack is quick, and
        it spares the job a second run.)"""
        with self._cond:
            self._cond.wait_for(lambda: not self._acked_later(), timeout)
            return not self._acked_later()

    def _acked_later(self) -> bool:
        return any(entry.succeeded for entry in self._jobs.values())

    def _wait(self, ready: Callable[[], bool], timeout: float | None) -> bool:
        """Wait for ``ready()`` or due acks (True), at most ``timeout``; ``_acks_due`` may move
        while waiting (a first ack), so the timer is set again at every wake-up."""
        end = math.inf if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                due = self._acks_due if self._acks else math.inf
                if now >= due:
                    return True
                if ready() or now >= end:
                    return False
                left = min(due, end) - now
                self._cond.wait(None if left == math.inf else left)

    def request_cancel(self, tokens: Sequence[str]) -> list[Lease]:
        """Jobs asked to stop (the heartbeat's ``cancelled``): mark them, for the job's code
        (``fairq.current_job()``) and an iterative job's next cursor, and interrupt the async
        ones. Returns the leases newly asked (of jobs still running)."""
        asked: list[Running] = []
        with self._cond:
            for token in tokens:
                entry = self._jobs.get(token)
                if entry is not None and not entry.cancel_requested and not entry.claimed:
                    entry.cancel_requested = True
                    asked.append(entry)
        for entry in asked:
            if entry.interrupt is not None:
                entry.interrupt()
        return [entry.lease for entry in asked]

    def not_asked(self) -> dict[str, str]:
        """Job id -> lease token of the jobs still running that were not asked to stop yet
        (fairq/worker/cancels.py asks the store about them)."""
        with self._cond:
            return {
                e.lease.job_id: token
                for token, e in self._jobs.items()
                if not e.cancel_requested and not e.claimed
            }

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

    def closed(self) -> bool:
        """The worker is stopping: an iterative job checkpoints and hands itself back."""
        with self._cond:
            return self._closed

    def abandon(self) -> None:
        """Stop waiting for running jobs: ``wait_until_empty`` returns at once from now on."""
        with self._cond:
            self._abandoned = True
            self._cond.notify_all()

    def has_room(self) -> bool:
        """A slot is free, or every slot can be freed by storing its ack; or closed."""
        with self._cond:
            return self._has_room()

    def _has_room(self) -> bool:
        return self._closed or len(self._acks) >= self.capacity or len(self._jobs) < self.capacity

    def free(self) -> int:
        """Free slots right now (0 once closed)."""
        with self._cond:
            return 0 if self._closed else max(self.capacity - len(self._jobs), 0)

    def wait_until_empty(self, timeout: float) -> bool:
        """Block until no lease is held, ``timeout`` passes, or abandoned; True when empty."""
        with self._cond:
            self._cond.wait_for(lambda: self._abandoned or not self._jobs, timeout=timeout)
            return not self._jobs
