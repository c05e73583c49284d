"""One run (a slice) of an iterative job (``fairq.app.iteration``) on the worker.

A run starts from the job's stored progress (``JobInfo.progress``: one read per slice) and
ends in one of five ways:

* the generator is exhausted: the last progress is checkpointed, then the job is acked with
  the others (``JobRunner._finish``);
* it raised (or yielded a cursor that is not JSON: ``CursorError``): a failed attempt, retried
  from its last checkpoint;
* its time slice is used up, or the worker is stopping: it checkpoints (one more slice) and
  releases the job — ready again at once, the attempt not counted, its tenant charged for the
  run — and the next run resumes from there (``Outcome.SLICE_ENDED``, or ``HANDED_BACK`` at a
  shutdown);
* its lease is gone (ran out, or a checkpoint was refused): it stops at the next cursor and
  stores nothing; whoever holds the job now runs the items since its last checkpoint again;
* it was asked to stop (a cancel request, fairq/cancel.py): it stops at the next cursor, and
  ends cancelled (never runs again).

Between those, a checkpoint every ``checkpoint_items`` cursors or ``checkpoint_seconds``
(which also extends the lease). The decisions are here, free of threads; the store calls are
made by the caller's thread (``def``) or, for ``async def``, off the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from typing import Any

from fairq.app.iteration import IterativeJob
from fairq.contract import Backend, CheckpointParams, GetJobsParams, ReleaseParams
from fairq.errors import CursorError, JobCancelled, LeaseError
from fairq.instrument import JobEnd, Outcome
from fairq.instrument.hooks import Hooks
from fairq.job import Progress
from fairq.worker.joblog import describe, job_fields
from fairq.worker.lost import why_lost
from fairq.worker.running import Running, RunningJobs

log = logging.getLogger("fairq.worker")


class Stop(Enum):
    """What ``SliceRun.advance`` asks of the loop after a cursor."""

    CHECKPOINT = "checkpoint"  # not a stop: store the progress (``save``), then go on
    SLICE = "slice"  # the time slice is used up: hand the job back
    SHUTDOWN = "shutdown"  # the worker is stopping: hand the job back now
    LOST = "lost"  # the lease is gone: stop, storing nothing


class SliceRun:
    """The bookkeeping of one run of an iterative job."""

    def __init__(
        self,
        backend: Backend,
        running: RunningJobs,
        hooks: Hooks,
        clock: Callable[[], float],
        entry: Running,
        definition: IterativeJob[Any],
    ) -> None:
        self.backend = backend
        self.running = running
        self.hooks = hooks
        self.clock = clock
        self.entry = entry
        self.lease = entry.lease
        self.definition = definition
        self.started = self.saved_at = time.monotonic()
        self.progress = Progress(cursor=None)
        self.unsaved: str | None = None  # the progress not stored yet, encoded
        self.since = 0  # cursors since the last checkpoint
        self.why_lost = ""

    def resume(self) -> Any:
        """The cursor to start from: the stored one, or None on a first run (a store read)."""
        found = self.backend.get_jobs(GetJobsParams(ids=[self.lease.job_id]))
        if found and found[0].progress is not None:
            self.progress = found[0].progress
        return self.progress.cursor

    def advance(self, cursor: Any) -> Stop | None:
        """Note one cursor yielded; what the loop must do now. CursorError if not JSON;
        JobCancelled if the job was asked to stop (it ends cancelled: fairq/cancel.py)."""
        if self.entry.cancel_requested:
            raise JobCancelled(
                f"iterative job {self.lease.name!r} (id {self.lease.job_id}) was asked to stop "
                f"(a cancel request); it stopped at cursor {_short(cursor)}"
            )
        progress = replace(self.progress, cursor=cursor, items=self.progress.items + 1)
        try:
            self.unsaved = progress.encode()
        except (TypeError, ValueError, RecursionError) as exc:
            raise CursorError(
                f"iterative job {self.lease.name!r} (id {self.lease.job_id}) yielded a cursor "
                f"of type {type(cursor).__name__} that is not JSON ({exc}); yield str, int, "
                "float, bool, None, or lists and dicts of them. Its last good cursor "
                f"({_short(self.progress.cursor)}) stays stored"
            ) from None
        self.progress = progress
        self.since += 1
        deadline = self.running.deadline(self.lease)
        if self.clock() >= deadline:
            self.why_lost = f"its lease ran out at {deadline:.3f}"
            return Stop.LOST
        if self.running.closed():
            return Stop.SHUTDOWN
        now = time.monotonic()
        if now - self.started >= self.definition.slice_seconds:
            return Stop.SLICE
        if (
            self.since >= self.definition.checkpoint_items
            or now - self.saved_at >= self.definition.checkpoint_seconds
        ):
            return Stop.CHECKPOINT
        return None

    def save(self) -> Stop | None:
        """Store the progress (a store call); Stop.LOST if the lease is no longer held."""
        if self.unsaved is None:
            return None
        params = CheckpointParams(token=self.lease.token, progress=self.unsaved, now=self.clock())
        try:
            result = self.backend.checkpoint(params)
        except LeaseError as exc:
            self.why_lost = describe(exc)
            return Stop.LOST
        self.running.extended({self.lease.token: result.deadline})
        self.unsaved, self.since, self.saved_at = None, 0, time.monotonic()
        self.hooks.after_checkpoint(self.lease, self.progress)
        return None

    def finish(self) -> None:
        """The iteration is done: store its last progress before its ack. A lost lease is left
        for the ack to report."""
        self.save()

    def hand_back(self, stop: Stop, seconds: float) -> None:
        """End the run for ``stop`` (not CHECKPOINT): checkpoint and release, or give up a
        lost lease. Nothing to do if shutdown already handed the job back."""
        if self.running.claim(self.lease.token) is None:
            return
        try:
            if stop is Stop.LOST:
                self._lost(seconds, self.why_lost)
                return
            self.progress = replace(self.progress, slices=self.progress.slices + 1)
            self.unsaved = self.progress.encode()
            if self.save() is Stop.LOST:
                self._lost(seconds, self.why_lost)
                return
            try:
                self.backend.release(ReleaseParams(token=self.lease.token, now=self.clock()))
            except LeaseError as exc:
                self._lost(seconds, describe(exc))
                return
            except Exception as exc:
                self.hooks.job_end(self.lease, JobEnd(Outcome.ERROR, seconds, describe(exc), exc))
                return
            if stop is Stop.SLICE:
                why = (
                    f"its time slice ({self.definition.slice_seconds:g} s) was used up after "
                    f"{self.progress.items} items in all; it resumes from its checkpoint"
                )
                self.hooks.job_end(self.lease, JobEnd(Outcome.SLICE_ENDED, seconds, why))
            else:
                self.hooks.job_end(self.lease, JobEnd(Outcome.HANDED_BACK, seconds))
        finally:
            self.running.done(self.lease.token)

    def _lost(self, seconds: float, cause: str) -> None:
        held = [(self.lease, self.running.deadline(self.lease))]
        why = why_lost(self.backend, held, self.clock())[self.lease.token]
        log.warning(
            "iterative job %s %s yielded after its lease was lost (%s; %s); stopped: the items "
            "since its last checkpoint run again where it runs next",
            self.lease.job_id,
            self.lease.name,
            cause,
            why,
            extra=job_fields(self.lease, "iteration_stopped"),
        )
        self.hooks.job_end(self.lease, JobEnd(Outcome.LEASE_LOST, seconds, f"{cause}; {why}"))


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:79] + "…"
