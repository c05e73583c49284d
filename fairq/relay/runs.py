"""The peer's side of a relayed job: claim its lease, keep it alive, store how it ended.

Inside a Celery, RQ or Dramatiq worker process, each relayed job runs between ``begin`` and
``succeeded``/``failed`` of this module (the integrations call them from the peer's own hooks):

* ``begin`` claims the lease the relay published with the job (one heartbeat with ``claim``:
  the run starts now, under the job's own lease; its wait in the broker was charged nothing). A
  lease that is no longer held — its hold lapsed while the message waited (a relay died), so the
  job was published again; or the job already ran — means this message must not run: ``begin``
  returns None and the integration skips it. That is how a job is never run twice by two
  messages except after an expiry.
* while the job runs, one heartbeat thread per process (``fairq.worker.keeper``) extends every
  claimed lease (every third of the shortest lease), so caps count really-running jobs and a
  killed worker's jobs come back when their lease runs out;
* the end is stored in fairq: an ack, or a failure with fairq's retry back-off (the job goes
  back to its tenant's queue and the relay releases it again when due) or dead after its last
  attempt. The tenant is charged the real run time, as for a native job.
* a cancel request (``App.cancel``: fairq/cancel.py) reaches a relayed job as it reaches a
  native one, by the heartbeat's reply: a job asked before its message is taken never runs
  (``begin`` ends it cancelled and returns None); a running one sees it through
  ``fairq.current_job()`` (set by ``begin`` on the thread that runs the job), and a job that
  stops on it (``raise_if_cancelled``) ends cancelled.

The App's plug-ins (``fairq.instrument``) see a relayed job as a native one: ``after_dequeue``
and ``before_run`` when ``begin`` claims it, ``after_run`` and the end's hooks in
``succeeded``/``failed`` (both on the thread that runs the job), ``lease_lost`` from the
heartbeat, and every store call when a plug-in times them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fairq.app import App
from fairq.backends import open_backend
from fairq.contract import AckManyParams, Backend, FailParams, HeartbeatParams
from fairq.current import RUNNING
from fairq.errors import LeaseError
from fairq.instrument import JobEnd, Outcome
from fairq.instrument.timing import TimedBackend
from fairq.job import JobInfo, JobState, Lease
from fairq.policy.retry import backoff
from fairq.relay.tickets import lease_of
from fairq.worker.joblog import ERROR_CHARS, describe, job_fields
from fairq.worker.keeper import LeaseKeeper
from fairq.worker.lost import why_lost

log = logging.getLogger("fairq.relay")


@dataclass
class RelayedRun:
    """One claimed job running in this process (``fairq.current_job()`` on its thread)."""

    lease: Lease
    deadline: float  # as last extended
    runs: RelayedRuns = field(repr=False)
    started: float = field(default_factory=time.monotonic)
    cancel_requested: bool = False  # a heartbeat's reply said so (fairq.current)

    def succeeded(self) -> None:
        """Store the job's success (its lease ends; its cap slot frees)."""
        self.runs.end(self, None)

    def failed(self, error: BaseException) -> JobInfo | None:
        """Store a failed attempt: retried after a back-off, or dead after the last attempt.
        The job's state afterwards, or None when the store did not take it."""
        return self.runs.end(self, error)


class RelayedRuns:
    """The relayed jobs this process runs, and the thread that keeps their leases.

    Safe with threads and with forking pools: each process opens its own connection to the
    store (the App's URL) on first use, and starts its own heartbeat thread.
    """

    def __init__(
        self,
        app: App,
        *,
        clock: Callable[[], float] = time.time,
        heartbeat_every: float | None = None,
    ) -> None:
        self.app = app
        self.clock = clock
        self.heartbeat_every = heartbeat_every
        self._keeper: LeaseKeeper[RelayedRun] = LeaseKeeper(
            self._beat, name="fairq-relayed-heartbeat", lost=self._lost, every=heartbeat_every
        )
        self._lock = threading.Lock()
        self._home = os.getpid()
        self._pid: int | None = None  # the process whose store connection is _backend
        self._backend: Backend | None = None  # this (forked) process's own connection
        self._timed: Backend | None = None  # it, timed for the plug-ins that want store calls

    # -- what the integrations call --------------------------------------------------------

    def begin(self, ticket: object) -> RelayedRun | None:
        """Claim the job a message's ticket names; None: skip the message (said in the log).

        Raises BadTicket for a ticket the relay did not write, and what the store raises when
        it cannot be reached (the peer then handles the message as it would any error).
        """
        lease = lease_of(ticket)
        backend = self.backend()
        claim = HeartbeatParams(tokens=[lease.token], now=self.clock(), claim=True)
        result = backend.heartbeat(claim)  # the run starts now: its wait in the broker was none
        if lease.token in result.lost:
            # the ticket's deadline is the relay's first hold: renewed since, it says nothing
            why = why_lost(backend, [(lease, None)], self.clock())[lease.token]
            log.info(
                "job %s %s not run: %s (this message is an older copy; the job was published "
                "again or already ran)",
                lease.job_id,
                lease.name,
                why,
                extra=job_fields(lease, "skipped"),
            )
            return None
        if lease.token in result.claimed:
            log.warning(
                "job %s %s not run: another copy of its message is running it (the broker "
                "delivered this one again; the job's own run reports its end)",
                lease.job_id,
                lease.name,
                extra=job_fields(lease, "skipped"),
            )
            return None
        # The run started at the claim, under the job's own lease: the ticket's times were the
        # relay's hold (the store's claim time is the new deadline less the lease).
        deadline = result.deadlines[lease.token]
        lease = replace(lease, started_at=deadline - lease.lease_timeout, deadline=deadline)
        hooks = self.app.hooks
        if lease.token in result.cancelled:
            hooks.after_dequeue([lease])
            self._cancel_unstarted(lease)
            return None
        run = RelayedRun(lease, deadline, self)
        self._keeper.hold(lease.token, run, lease.lease_timeout)
        hooks.after_dequeue([lease])
        hooks.before_run(lease)
        RUNNING.set(run)  # the peer runs the job on this thread, between begin and end
        run.started = time.monotonic()
        return run

    def end(self, run: RelayedRun, error: BaseException | None) -> JobInfo | None:
        if RUNNING.get() is run:
            RUNNING.set(None)
        self._keeper.drop(run.lease.token)
        duration = time.monotonic() - run.started
        self.app.hooks.after_run(run.lease, error, duration)
        if error is None:
            self._ack(run, duration)
            return None
        return self._fail(run, error, duration)

    def backend(self) -> Backend:
        """The store: the App's own in the process that made this object; a forked child
        (a prefork pool's) opens its own connection, since none may cross a fork."""
        pid = os.getpid()
        if pid == self._home:
            return self.app.timed_backend
        if self._pid != pid or self._backend is None:
            with self._lock:
                if self._pid != pid or self._backend is None:
                    backend = open_backend(self.app.url)
                    hooks = self.app.hooks
                    timed = TimedBackend(backend, hooks) if hooks.times_store_calls else None
                    self._backend, self._timed, self._pid = backend, timed, pid
        return self._timed or self._backend

    def close(self) -> None:
        self._keeper.stop()
        if self._backend is not None and self._pid == os.getpid():
            self._backend.close()  # a child's own; the App's is the App's to close
        self._backend = self._timed = None

    # -- outcomes --------------------------------------------------------------------------

    def _ack(self, run: RelayedRun, duration: float) -> None:
        lease = run.lease
        result = self.backend().ack_many(AckManyParams(tokens=[lease.token], now=self.clock()))
        if lease.token in result.lost:
            why = why_lost(self.backend(), [(lease, run.deadline)], self.clock())[lease.token]
            end = JobEnd(Outcome.LEASE_LOST, duration, f"it succeeded, but {why}")
            self.app.hooks.job_end(lease, end)
            return
        self.app.hooks.job_end(lease, JobEnd(Outcome.SUCCEEDED, duration))

    def _cancel_unstarted(self, lease: Lease) -> None:
        """A job asked to stop before its message was taken: it ends cancelled, unrun."""
        why = "cancelled on request before it started"
        params = FailParams(token=lease.token, now=self.clock(), error=why, retry_at=None)
        try:
            info = self.backend().fail(params)
        except LeaseError:
            return  # expired meanwhile: the store ended it cancelled itself
        outcome = Outcome.CANCELLED if info.state is JobState.CANCELLED else Outcome.DEAD
        self.app.hooks.job_end(lease, JobEnd(outcome, 0.0, why))

    def _fail(self, run: RelayedRun, error: BaseException, duration: float) -> JobInfo | None:
        lease = run.lease
        definition = self.app.jobs.get(lease.name)
        base = definition.retry_base if definition is not None else 1.0
        text = describe(error)
        stored = text + "\n\n" + "".join(traceback.format_exception(error)).rstrip()
        if len(stored) > ERROR_CHARS:
            stored = stored[: ERROR_CHARS - 1] + "…"
        now = self.clock()
        params = FailParams(
            token=lease.token,
            now=now,
            error=stored,
            retry_at=now + backoff(lease.attempt, base=base),
        )
        try:
            info = self.backend().fail(params)
        except LeaseError:
            why = why_lost(self.backend(), [(lease, run.deadline)], self.clock())[lease.token]
            end = JobEnd(Outcome.LEASE_LOST, duration, f"{text}; {why}", error)
            self.app.hooks.job_end(lease, end)
            return None
        ended = {JobState.DEAD: Outcome.DEAD, JobState.CANCELLED: Outcome.CANCELLED}
        outcome = ended.get(info.state, Outcome.RETRYING)  # cancelled: it had a cancel request
        self.app.hooks.job_end(lease, JobEnd(outcome, duration, text, error))
        return info

    # -- the heartbeat ---------------------------------------------------------------------

    def _beat(self, held: dict[str, RelayedRun]) -> list[str] | None:
        params = HeartbeatParams(tokens=list(held), now=self.clock())
        try:
            result = self.backend().heartbeat(params)
        except Exception as exc:
            log.error("heartbeat of relayed jobs failed: %s; retrying", describe(exc))
            return None
        asked = set(result.cancelled)
        with self._lock:
            for run in held.values():
                if run.lease.token in result.deadlines:
                    run.deadline = result.deadlines[run.lease.token]
                    if run.lease.token in asked and not run.cancel_requested:
                        run.cancel_requested = True
                        log.info(
                            "job %s %s was asked to stop (a cancel request): it ends "
                            "cancelled if it stops on it (fairq.current_job())",
                            run.lease.job_id,
                            run.lease.name,
                            extra=job_fields(run.lease, "cancel_requested"),
                        )
        return [token for token in held if token not in result.deadlines]

    def _lost(self, lost: list[RelayedRun]) -> None:
        why = why_lost(self.backend(), [(r.lease, r.deadline) for r in lost], self.clock())
        for run in lost:
            self.app.hooks.lease_lost(run.lease, why[run.lease.token])
