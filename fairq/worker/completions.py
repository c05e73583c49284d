"""Storing the acks of succeeded jobs: in batches, by the fetch loop alone, retried while the
store fails.

A job that succeeded keeps its slot (``RunningJobs.succeeded``: its lease stays held, and the
heartbeat keeps extending it) until its ack is stored, so a capped tenant's slot in the store
is free before this worker's next dequeue counts its own free slots. The fetch loop stores
every ack, woken when every slot waits for its ack or once the oldest has waited ``ACK_WAIT``:

* with its refill of their slots, in one call (``ack_and_dequeue``), when it has slots to fill;
* alone (``ack_many``) when it has not: while it waits for new work (that wait holds the
  slots), while it pauses after a store failure, and after the stop until shutdown seals the
  buffer (before running jobs are handed back, and once more before the worker returns).

When the store cannot be reached, the batch is buffered again (its slots held) and tried again
after a back-off, for as long as the job's lease could still hold (``lease_timeout`` after it
ended; the heartbeat keeps extending it meanwhile). So a short outage does not make finished
jobs run twice; only a longer one does, once their leases have lapsed. Failures do not come
here: they are stored one by one with ``fail``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from fairq.contract import AckManyParams, AckManyResult, Backend
from fairq.instrument import JobEnd, Outcome
from fairq.instrument.hooks import Hooks, default_hooks
from fairq.worker.joblog import describe
from fairq.worker.lost import why_lost
from fairq.worker.running import Running, RunningJobs

log = logging.getLogger("fairq.worker")

T = TypeVar("T")

RETRY_FIRST, RETRY_MAX = 0.5, 5.0  # back-off between tries while the store is unreachable


class Acks:
    """Stores the acks the fetch loop takes from ``running`` (one thread: the fetch loop)."""

    def __init__(
        self,
        backend: Backend,
        running: RunningJobs,
        *,
        clock: Callable[[], float],
        hooks: Hooks | None = None,
    ):
        self.backend = backend
        self.running = running
        self.clock = clock
        self.hooks = hooks or default_hooks(clock)
        self._retry_wait = 0.0  # the current back-off; 0 while the store answers

    def store_due(self) -> bool:
        """Store every buffered ack alone, in one ``ack_many``; False if the store failed."""
        batch = self.running.take_acks()
        if not batch:
            return True
        try:
            self.store_with(batch, lambda acks: (self.backend.ack_many(acks), None))
        except Exception:  # _unstored kept the batch for a retry, or gave up on it, and said so
            return False
        return True

    def store_with(
        self, batch: list[Running], call: Callable[[AckManyParams], tuple[AckManyResult, T]]
    ) -> T:
        """Store the acks of ``batch`` (taken) with ``call``, which may do more in the same
        step (``Backend.ack_and_dequeue``), and free their slots; returns what else it gave.
        When it raises, the batch is kept for a retry (or given up on), then it re-raises."""
        results = {entry.lease.token: entry.result for entry in batch if entry.result is not None}
        tokens = [entry.lease.token for entry in batch]
        acks = AckManyParams(tokens=tokens, now=self.clock(), results=results)
        try:
            result, more = call(acks)
        except Exception as exc:
            self._unstored(batch, exc)
            raise
        self._stored(batch, result)
        return more

    def _stored(self, batch: list[Running], result: AckManyResult) -> None:
        if self._retry_wait:
            self._retry_wait = 0.0
            self.running.store_answers()
        try:
            lost = set(result.lost)
            held = [(e.lease, e.deadline) for e in batch if e.lease.token in lost]
            why = why_lost(self.backend, held, self.clock()) if held else {}
            ends = []
            for entry in batch:
                if entry.lease.token in lost:
                    error = f"the ack was refused; {why[entry.lease.token]}"
                    ends.append((entry.lease, JobEnd(Outcome.LEASE_LOST, entry.duration, error)))
                else:
                    ends.append((entry.lease, JobEnd(Outcome.SUCCEEDED, entry.duration)))
            self.hooks.job_ends(ends)
        finally:
            self.running.done_many([entry.lease.token for entry in batch])

    def _unstored(self, batch: list[Running], exc: Exception) -> None:
        """The store did not answer: keep what may still be acked, give up on the rest."""
        now = time.monotonic()
        keep = [entry for entry in batch if _may_hold(entry, now)]
        wait = min(max(self._retry_wait * 2, RETRY_FIRST), RETRY_MAX)
        if keep and self.running.keep_acks(keep, now + wait):
            self._retry_wait = wait
            log.warning(
                "could not store %d ack(s): %s; trying again in %.1f s",
                len(keep),
                describe(exc),
                wait,
                extra={"action": "ack_retry"},
            )
        else:
            keep = []  # sealed: the worker is done, nothing stores them later
        kept = {id(entry) for entry in keep}
        given_up = [entry for entry in batch if id(entry) not in kept]
        for entry in given_up:
            end = JobEnd(Outcome.ERROR, entry.duration, describe(exc), exc)
            self.hooks.job_end(entry.lease, end)
        self.running.done_many([entry.lease.token for entry in given_up])


def _may_hold(entry: Running, now: float) -> bool:
    """Could the job's lease still be held (so an ack may yet be stored)?"""
    return now < entry.started + entry.duration + entry.lease.lease_timeout
