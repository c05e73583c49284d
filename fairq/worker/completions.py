"""The completion buffer: succeeded jobs are acked together, one ``ack_many`` per batch.

A job that succeeded keeps its slot (its lease stays in ``RunningJobs``, and the heartbeat
keeps extending it) until its ack is stored, so a capped tenant's slot in the store is free
before this worker's next dequeue counts its own free slots. The buffer is flushed:

* by the fetch loop, which takes them (``take``) and stores them in the same call as its
  next dequeue (``store_with``), when a slot is free or every slot waits for its ack
  (``RunningJobs.settle``);
* once the oldest entry has waited ``max_wait`` seconds: by the fetch loop if it waits for its
  other slots (woken by ``RunningJobs.acks_due``, it stores them with its refill of their
  slots, in one call), else by its own thread (fairq-ack; the fetch loop may be waiting for new
  work, or in a call);
* at shutdown (``close``), before running jobs are handed back.

The ack is stored at flush time (``now`` of the flush), about ``max_wait`` after the job
ended at most; twice that if the fetch loop, woken to store it, has not taken it by then (the
ack thread stores it after all). Failures do not come here: they are stored one by one with
``fail``.

When the store cannot be reached, the batch stays buffered (its slots held) and is tried again
after a back-off, for as long as the job's lease could still hold (``lease_timeout`` after it
ended; the heartbeat keeps extending it meanwhile). So a short outage does not make finished
jobs run twice; only a longer one does, once their leases have lapsed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from fairq.contract import AckManyParams, AckManyResult, Backend
from fairq.worker.joblog import Outcome, describe, log_job_end
from fairq.worker.lost import why_lost
from fairq.worker.running import Running, RunningJobs

log = logging.getLogger("fairq.worker")

T = TypeVar("T")

MAX_WAIT = 0.002  # seconds a succeeded job waits, at most, for its ack to be flushed
RETRY_FIRST, RETRY_MAX = 0.5, 5.0  # back-off between tries while the store is unreachable


class Completions:
    """Succeeded jobs waiting for their ack; at most one per slot of the worker."""

    def __init__(
        self,
        backend: Backend,
        running: RunningJobs,
        *,
        clock: Callable[[], float],
        max_wait: float = MAX_WAIT,
    ) -> None:
        self.backend = backend
        self.running = running
        self.clock = clock
        self.max_wait = max_wait
        self._pending: list[Running] = []
        self._oldest = 0.0  # monotonic time the oldest pending entry was added
        self._retry_wait = 0.0  # the current back-off; 0 while the store answers
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="fairq-ack", daemon=True)
        self._thread.start()

    def add(self, entry: Running) -> None:
        """A claimed job succeeded: ack it with the next flush (then its slot is freed)."""
        with self._cond:
            closed = self._closed
            if not closed:
                if not self._pending:
                    self._oldest = time.monotonic()
                self._pending.append(entry)
                # Only the first wakes the flusher (its timer starts): waking it for every
                # job would cost a thread switch each.
                if len(self._pending) == 1:
                    self._cond.notify_all()
                self.running.settle()  # under our lock: its count is that of _pending
        if closed:  # after shutdown: store it at once rather than lose it
            self._store([entry])

    def take(self) -> list[Running]:
        """Every pending job, for the caller to store (``store_with``)."""
        with self._cond:
            batch, self._pending = self._pending, []
            self.running.unsettle(len(batch))
        return batch

    def flush(self) -> None:
        """Ack every pending job now, in one ``ack_many``; frees their slots."""
        batch = self.take()
        if batch:
            self._store(batch)

    def store_with(
        self, batch: list[Running], call: Callable[[AckManyParams], tuple[AckManyResult, T]]
    ) -> T:
        """Store the acks of ``batch`` (taken) with ``call``, which may do more in the same
        step (``Backend.ack_and_dequeue``), and free their slots; returns what else it gave.
        When it raises, the batch is kept for a retry (or given up on), then it re-raises."""
        acks = AckManyParams(tokens=[entry.lease.token for entry in batch], now=self.clock())
        try:
            result, more = call(acks)
        except Exception as exc:
            self._unstored(batch, exc)
            raise
        self._stored(batch, result)
        return more

    def close(self) -> None:
        """Flush what is pending and stop the flusher thread; later adds are acked at once."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        self.flush()

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or bool(self._pending))
                if self._closed:
                    return
                due = self._oldest + max(self.max_wait, self._retry_wait)
                self._cond.wait_for(self._flush_now, timeout=max(due - time.monotonic(), 0.0))
                if self._handing_over() and self.running.acks_due():
                    # The fetch loop stores them with its refill; if it has not taken them
                    # within another max_wait, they are stored here after all.
                    self._cond.wait_for(self._flush_now, timeout=self.max_wait)
                if self._closed:
                    return
            self.flush()

    def _handing_over(self) -> bool:
        """Leave the acks due to the fetch loop (``RunningJobs.acks_due``)? Not while the
        store fails: the back-off and its warnings are this thread's."""
        return bool(self._pending) and not self._closed and self._retry_wait == 0

    def _flush_now(self) -> bool:
        """Stop waiting before the timer: closing, or nothing left (the fetch loop took it)."""
        return self._closed or not self._pending

    def _store(self, batch: list[Running]) -> None:
        # When it fails, _unstored has kept the batch for a retry or given up on it, and said so.
        with contextlib.suppress(Exception):
            self.store_with(batch, lambda acks: (self.backend.ack_many(acks), None))

    def _stored(self, batch: list[Running], result: AckManyResult) -> None:
        self._retry_wait = 0.0
        try:
            lost = set(result.lost)
            held = [(e.lease, e.deadline) for e in batch if e.lease.token in lost]
            why = why_lost(self.backend, held, self.clock()) if held else {}
            for entry in batch:
                if entry.lease.token in lost:
                    error = f"the ack was refused; {why[entry.lease.token]}"
                    log_job_end(entry.lease, Outcome.LEASE_LOST, entry.duration, error=error)
                else:
                    log_job_end(entry.lease, Outcome.SUCCEEDED, entry.duration)
        finally:
            self.running.done_many([entry.lease.token for entry in batch])

    def _unstored(self, batch: list[Running], exc: Exception) -> None:
        """The store did not answer: keep what may still be acked, give up on the rest."""
        now = time.monotonic()
        with self._cond:
            keep = [] if self._closed else [e for e in batch if _may_hold(e, now)]
            if keep:
                self._retry_wait = min(max(self._retry_wait * 2, RETRY_FIRST), RETRY_MAX)
                self._oldest = now  # the next try is one back-off from now
                self._pending[:0] = keep
                self.running.settle(len(keep))
        if keep:
            log.warning(
                "could not store %d ack(s): %s; trying again in %.1f s",
                len(keep),
                describe(exc),
                self._retry_wait,
                extra={"action": "ack_retry"},
            )
        kept = {id(entry) for entry in keep}
        given_up = [entry for entry in batch if id(entry) not in kept]
        for entry in given_up:
            log_job_end(
                entry.lease, Outcome.ERROR, entry.duration, error=describe(exc), exc_info=exc
            )
        self.running.done_many([entry.lease.token for entry in given_up])


def _may_hold(entry: Running, now: float) -> bool:
    """Could the job's lease still be held (so an ack may yet be stored)?"""
    return now < entry.started + entry.duration + entry.lease.lease_timeout
