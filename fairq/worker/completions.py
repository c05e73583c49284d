"""The completion buffer: succeeded jobs are acked together, one ``ack_many`` per batch.

A job that succeeded keeps its slot (its lease stays in ``RunningJobs``, and the heartbeat
keeps extending it) until its ack is stored, so a capped tenant's slot in the store is free
before this worker's next dequeue counts its own free slots. The buffer is flushed:

* by the fetch loop, right before each dequeue (``flush``);
* by its own thread (fairq-ack) once the oldest entry has waited ``max_wait`` seconds, or at
  once when it holds ``max_size`` entries (every slot of the worker is waiting for its ack);
* at shutdown (``close``), before running jobs are handed back.

The ack is stored at flush time (``now`` of the flush), at most ``max_wait`` after the job
ended. Failures do not come here: they are stored one by one with ``fail``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from fairq.contract import AckManyParams, Backend
from fairq.worker.joblog import Outcome, describe, log_job_end
from fairq.worker.running import Running, RunningJobs

log = logging.getLogger("fairq.worker")

MAX_WAIT = 0.002  # seconds a succeeded job waits, at most, for its ack to be flushed


class Completions:
    """Succeeded jobs waiting for their ack; bounded by ``max_size`` (the worker's slots)."""

    def __init__(
        self,
        backend: Backend,
        running: RunningJobs,
        *,
        clock: Callable[[], float],
        max_size: int,
        max_wait: float = MAX_WAIT,
    ) -> None:
        self.backend = backend
        self.running = running
        self.clock = clock
        self.max_size = max(max_size, 1)
        self.max_wait = max_wait
        self._pending: list[Running] = []
        self._oldest = 0.0  # monotonic time the oldest pending entry was added
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="fairq-ack", daemon=True)
        self._thread.start()

    def add(self, entry: Running) -> None:
        """A claimed job succeeded: ack it with the next flush (then its slot is freed)."""
        with self._cond:
            if self._closed:
                closed = True
            else:
                closed = False
                if not self._pending:
                    self._oldest = time.monotonic()
                self._pending.append(entry)
                self._cond.notify_all()
        if closed:  # after shutdown: store it at once rather than lose it
            self._store([entry])

    def flush(self) -> None:
        """Ack every pending job now, in one ``ack_many``; frees their slots."""
        with self._cond:
            batch, self._pending = self._pending, []
        if batch:
            self._store(batch)

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
                due = self._oldest + self.max_wait
                self._cond.wait_for(
                    lambda: (
                        self._closed or len(self._pending) >= self.max_size or not self._pending
                    ),
                    timeout=max(due - time.monotonic(), 0.0),
                )
                if self._closed:
                    return
            self.flush()

    def _store(self, batch: list[Running]) -> None:
        try:
            try:
                tokens = [entry.lease.token for entry in batch]
                result = self.backend.ack_many(AckManyParams(tokens=tokens, now=self.clock()))
            except Exception as exc:
                for entry in batch:
                    log_job_end(
                        entry.lease,
                        Outcome.ERROR,
                        entry.duration,
                        error=describe(exc),
                        exc_info=exc,
                    )
                return
            lost = set(result.lost)
            for entry in batch:
                if entry.lease.token in lost:
                    log_job_end(
                        entry.lease,
                        Outcome.LEASE_LOST,
                        entry.duration,
                        error="lease lost (it expired or was taken back before the ack was "
                        "stored); the job went back to its queue",
                    )
                else:
                    log_job_end(entry.lease, Outcome.SUCCEEDED, entry.duration)
        finally:
            for entry in batch:
                self.running.done(entry.lease.token)
