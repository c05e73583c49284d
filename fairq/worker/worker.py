"""The worker: runs an App's jobs from its store until stopped, then shuts down gracefully.

Threads, and who talks to the store::

    caller of run()   waits; turns SIGTERM/SIGINT into stop() (main thread only)
    fairq-worker      publish and start the others; at stop, shutdown and hand-back
    fairq-fetch       the fetch loop (dequeue/maintain/wait), and the one thread storing acks:
                      with its refill (ack_and_dequeue) when every slot waits for its ack, a
                      slot is free, or the oldest ack has waited ~2 ms; else alone (ack_many):
                      while it waits for new work or after a store failure, and after the stop
                      until shutdown has sealed the buffer (``completions``)
    fairq-job-N       ``def`` jobs; a failure is stored here, a success buffered (N = concurrency);
                      an iterative job's checkpoints and hand-backs are stored here too
    fairq-async       ``async def`` jobs on one event loop (each dequeued batch starts there with
                      one wake-up); a success is buffered from there, fairq-report stores failures
    fairq-heartbeat   extends the held leases
    fairq-maintain    expires lapsed leases and prunes old jobs on every queue
    fairq-weights     calls the app's tenant_weights callbacks (only if it has some)
    fairq-periodic    enqueues the ticks of the app's periodic jobs of the worker's queues
                      (only if it has some, and not in burst mode)

At rest: the caller, fairq-worker, fairq-fetch, one fairq-job (its wait for new work),
fairq-heartbeat and fairq-maintain. The last three threads above stay apart, idle but for their
duty: on one timer thread, a long prune (every old job in one call) or a slow tenant_weights
callback (the app's code) would hold the heartbeat back until leases lapse.

Shutdown: stop taking jobs; give the running ones ``grace_period`` seconds; release the rest
(ready again at once, the attempt not counted); return. A second stop(hand_back_now=True) (the
second signal) releases at once. A killed worker's jobs come back when their leases lapse.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from fairq.app import App, unseen_queues
from fairq.contract import Backend, ReleaseParams
from fairq.errors import ConfigError, FairqError, LeaseError
from fairq.instrument import JobEnd, Outcome
from fairq.policy.queues import QueueOrder
from fairq.startup import STOP_SIGNALS, StartupSignals
from fairq.urls import redact_url
from fairq.worker.cancels import CancelWatch
from fairq.worker.expiries import Expiries
from fairq.worker.fetcher import Fetcher
from fairq.worker.heartbeat import Heartbeat
from fairq.worker.joblog import describe
from fairq.worker.lost import why_lost
from fairq.worker.maintenance import Maintenance
from fairq.worker.periodic import PeriodicScheduler
from fairq.worker.runner import JobRunner
from fairq.worker.running import RunningJobs
from fairq.worker.unknown import DEFAULT_TIMEOUT as DEFAULT_UNKNOWN_JOB_TIMEOUT
from fairq.worker.weights import WeightRefresher

log = logging.getLogger("fairq.worker")

DEFAULT_RETENTION = 24 * 3600.0
# Jobs at once per process. Each dequeue and each ack_many serves up to this many jobs, so a
# short job's share of those round trips shrinks as it grows: 8 threads cost about 40 % less CPU
# per no-op job than 4 did (benchmarks/worker_cpu.py), the threads Dramatiq starts by default.
DEFAULT_CONCURRENCY = 8
STORE_WAIT = 5.0  # how long shutdown waits for outcomes already being stored
_DONE = b"\0"  # written to the wake-up pipe when the worker has stopped


def _noted(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler has nothing to do: the wake-up fd carries the signal."""


Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
#: The threads beside the fetch loop, started after publishing and stopped last.
Beat = Heartbeat | CancelWatch | Maintenance | WeightRefresher | PeriodicScheduler


class Worker:
    """Runs the jobs of ``app`` from its store.

    ``queues``: which queues to serve and in what order, e.g. ``"critical, default:6, slow:1"``
    (see ``QueueOrder``); by default ``app.queue_order()``: every declared queue (jobs' home
    queues and ``app.queue(...)``, throttle queues included), strict ones first.
    ``concurrency``: jobs at once, ``def`` and ``async def`` together. ``grace_period``: seconds
    running jobs get to finish at shutdown before they are handed back. ``heartbeat_interval``:
    seconds between lease extensions (default: a third of the shortest running lease; each
    extension also charges running jobs' elapsed time to their tenants).
    ``poll_interval``: the longest wait for new work before looking again. ``burst``: return once
    no job is ready or scheduled. ``retention``: seconds succeeded jobs are kept.
    ``unknown_job_timeout``: a job whose name the app does not declare is handed back for a
    worker that knows it (a rolling deploy, apps sharing a queue) until it is this many seconds
    old (since its enqueue); then it is dead. ``periodic``: enqueue the app's periodic jobs of
    the queues served (docs/periodic.md; never in burst mode).

    What happens to each job is reported to the App's plug-ins (``fairq.instrument``: the job
    log, metrics, tracing), as registered when ``run()`` starts.
    """

    def __init__(
        self,
        app: App,
        queues: QueueOrder | str | Sequence[str] | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        worker_id: str | None = None,
        grace_period: float = 30.0,
        heartbeat_interval: float | None = None,
        poll_interval: float = 1.0,
        *,
        burst: bool = False,
        retention: float | None = DEFAULT_RETENTION,
        maintenance_interval: float = 5.0,
        app_name: str | None = None,
        unknown_job_timeout: float = DEFAULT_UNKNOWN_JOB_TIMEOUT,
        periodic: bool = True,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(
                f"concurrency must be a whole number of at least 1, not {concurrency!r}"
            )
        self.app = app
        self.hooks = app.hooks  # the App's plug-ins (fairq.instrument), taken again at run()
        self.order = queue_order(app, queues)
        self._queues_named = queues is not None  # else the App's own: nothing to check
        self.concurrency = concurrency
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.grace_period = _seconds("grace_period", grace_period, zero_ok=True)
        self.heartbeat_interval = (
            None
            if heartbeat_interval is None
            else _seconds("heartbeat_interval", heartbeat_interval)
        )
        self.poll_interval = _seconds("poll_interval", poll_interval)
        self.maintenance_interval = _seconds("maintenance_interval", maintenance_interval)
        self.retention = None if retention is None else _seconds("retention", retention)
        self.burst = burst
        if not isinstance(periodic, bool):
            raise ConfigError(f"periodic must be True or False, not {periodic!r}")
        self.periodic = periodic and not burst
        self.unknown_job_timeout = _seconds(
            "unknown_job_timeout", unknown_job_timeout, zero_ok=True
        )
        self._check_heartbeat()
        self.app_name = app_name or f"App({redact_url(app.url)!r})"
        self.running = RunningJobs(concurrency)
        self.expiries = Expiries(app.clock, self.hooks)
        self._stopping = threading.Event()
        #: Set once the worker has published its jobs and started fetching.
        self.started = threading.Event()
        self._stop_requested_at: float | None = None
        self._signals = 0
        self._wake_fds: tuple[int, int] | None = None
        self._previous_wakeup_fd = -1
        self._error: BaseException | None = None

    @property
    def backend(self) -> Backend:
        """The store, opened on first use; each call timed if a plug-in wants store calls."""
        return self.app.timed_backend

    # -- running and stopping -------------------------------------------------------------

    def run(self, *, startup: StartupSignals | None = None) -> None:
        """Serve jobs until stopped, then shut down gracefully; re-raises a startup failure.

        In the main thread, SIGTERM and SIGINT stop the worker (a second one hands the running
        jobs back at once). ``startup``: the stop signals caught while the process started;
        with one, the worker stops before it takes any job.
        """
        in_main = threading.current_thread() is threading.main_thread()
        previous = self._install_signals() if in_main else {}
        for name in startup.received if startup is not None else ():
            self._signals += 1  # from here on, signals come through the wake-up pipe
            self._handle_signal(name)
        thread = threading.Thread(target=self._serve, name="fairq-worker")
        try:
            thread.start()
            if self._wake_fds is not None:
                self._relay_signals()
            thread.join()
        finally:
            self._restore_signals(previous)
        if self._error is not None:
            raise self._error

    def stop(self, *, hand_back_now: bool = False) -> None:
        """Stop taking jobs; running ones get the grace period, or are handed back at once."""
        if self._stop_requested_at is None:
            self._stop_requested_at = time.monotonic()
        self._stopping.set()
        self.running.close()
        if hand_back_now:
            self.running.abandon()

    @contextlib.contextmanager
    def in_thread(self) -> Iterator[Worker]:
        """Run in a background thread for the ``with`` block, which starts once the worker has
        (or has failed to); stop and wait for it at the end."""
        thread = threading.Thread(target=self.run, name="fairq-worker-main", daemon=True)
        thread.start()
        while not self.started.wait(0.05) and thread.is_alive():
            pass
        try:
            yield self
        finally:
            self.stop()
            thread.join()

    # -- the worker thread ----------------------------------------------------------------

    def _serve(self) -> None:
        runner: JobRunner | None = None
        fetcher: Fetcher | None = None
        beats: list[Beat] = []
        try:
            if self._stopping.is_set():
                log.info("stopped before it started: no job taken", extra={"action": "stopped"})
                return
            self.hooks = self.expiries.hooks = self.app.hooks
            self.app.publish()
            self._warn_unseen_queues()
            runner = JobRunner(
                self.app,
                self.running,
                app_name=self.app_name,
                clock=self.app.clock,
                unknown_job_timeout=self.unknown_job_timeout,
            )
            beats = [
                self._heartbeat(),
                CancelWatch(self.backend, self.running),
                self._maintenance(),
                self._weights(),
                self._periodic(),
            ]
            for beat in beats:
                beat.start()
            fetcher = self._fetcher(runner)
            self._log_start()
            fetcher.start()
            self.started.set()
            self._stopping.wait()  # set by stop(), or by the fetcher when a burst is done
        except BaseException as exc:
            self._error = exc
            # fairq's own errors say what is wrong and how to fix it: no traceback for them
            trace = None if isinstance(exc, FairqError) else exc
            log.error("worker failed: %s", describe(exc), exc_info=trace)
        finally:
            try:
                if fetcher is not None:
                    fetcher.close()
                self._shut_down(runner, fetcher, beats)
            finally:
                if self._wake_fds is not None:
                    os.write(self._wake_fds[1], _DONE)

    def _heartbeat(self) -> Heartbeat:
        return Heartbeat(
            self.backend,
            self.running,
            clock=self.app.clock,
            interval=self.heartbeat_interval,
            hooks=self.hooks,
        )

    def _maintenance(self) -> Maintenance:
        return Maintenance(
            self.backend,
            clock=self.app.clock,
            interval=self.maintenance_interval,
            retention=self.retention,
            expiries=self.expiries,
        )

    def _weights(self) -> WeightRefresher:
        served = set(self.order.queues)
        registrations = [r for q, r in self.app.weight_callbacks.items() if q in served]
        return WeightRefresher(self.backend, registrations, clock=self.app.clock)

    def _periodic(self) -> PeriodicScheduler:
        served = set(self.order.queues)
        schedules = [s for s in self.app.schedules.values() if s.queue in served]
        return PeriodicScheduler(self.app, schedules if self.periodic else [], clock=self.app.clock)

    def _check_heartbeat(self) -> None:
        """Warn when beats are too rare: a lease may lapse, and long jobs are charged late."""
        if self.heartbeat_interval is None or not self.app.jobs:
            return
        shortest = min(self.app.jobs.values(), key=lambda d: d.lease_timeout)
        if self.heartbeat_interval > shortest.lease_timeout / 3:
            log.warning(
                "heartbeat_interval %g s is over a third of the lease of job %r (%g s): its lease "
                "may lapse between beats, and long runs are charged to their tenant late",
                self.heartbeat_interval,
                shortest.name,
                shortest.lease_timeout,
            )

    def _warn_unseen_queues(self) -> None:
        """A queue named (``--queues``) that the App does not declare and the store has never
        seen is most likely a typo: say so. Served anyway, not refused: a worker may start
        before the first job of a queue its App does not declare (a job enqueued there with
        ``options(queue=…)``), and a worker that will not start is an outage at deploy time."""
        if not self._queues_named:
            return
        missing = unseen_queues.unseen(self.app, self.order.queues)
        if missing:
            log.warning(
                "%s; serving it anyway",
                unseen_queues.describe(self.app, missing),
                extra={"action": "unseen_queue", "queues": missing},
            )

    def _fetcher(self, runner: JobRunner) -> Fetcher:
        return Fetcher(
            self.backend,
            self.order,
            self.running,
            runner,
            worker_id=self.worker_id,
            clock=self.app.clock,
            idle_wait=self.poll_interval,
            burst=self.burst,
            stopping=self._stopping,
            expiries=self.expiries,
            hooks=self.hooks,
        )

    def _log_start(self) -> None:
        log.info(
            "worker %s started: store %s, queues %s, concurrency %d, jobs: %s",
            self.worker_id,
            redact_url(self.app.url),
            self.order,
            self.concurrency,
            ", ".join(sorted(self.app.jobs)) or "(none)",
            extra={"action": "worker_start", "worker_id": self.worker_id},
        )

    def _shut_down(
        self,
        runner: JobRunner | None,
        fetcher: Fetcher | None,
        beats: Sequence[Beat],
    ) -> None:
        self.running.close()
        started = self._stop_requested_at or time.monotonic()
        grace = max(self.grace_period - (time.monotonic() - started), 0.0)
        if len(self.running):
            log.info(
                "stopping: waiting up to %.1f s for %d running job(s)", grace, len(self.running)
            )
        self.running.wait_until_empty(grace)
        self.running.wait_for_acks_stored(STORE_WAIT)  # succeeded jobs are acked, not handed back
        handed_back = self._hand_back()
        # A wait for new work under way may take the jobs just handed back: let it end (it
        # hands them back again) before the process can end with them leased to nobody.
        wait = self.poll_interval + STORE_WAIT
        if handed_back and fetcher is not None and not fetcher.wait_ended(wait):
            log.warning(
                "stopping: a wait for new work did not end in time; a job it takes runs "
                "again once its lease expires",
                extra={"action": "wait_not_ended"},
            )
        self.running.wait_until_empty(STORE_WAIT)
        self.running.seal()  # the fetch loop stores the last acks
        if not self.running.wait_for_acks_stored(STORE_WAIT):
            log.warning(
                "stopping: acks not stored in time; those jobs run again once their leases expire",
                extra={"action": "acks_not_stored"},
            )
        for beat in beats:
            beat.stop()
        if runner is not None:
            runner.shutdown()
        expiries = self.expiries
        log.info(
            "worker %s stopped; expired leases found: %d (jobs dead of it: %d)",
            self.worker_id,
            expiries.count,
            expiries.dead,
            extra={
                "action": "worker_stop",
                "worker_id": self.worker_id,
                "expired_leases": expiries.count,
                "expired_dead": expiries.dead,
            },
        )

    def _hand_back(self) -> int:
        """Release the jobs still running: ready again at once, this attempt not counted.
        Returns how many there were."""
        entries = self.running.claim_all()
        for entry in entries:
            lease = entry.lease
            if entry.cancel is not None:
                entry.cancel()
            ran = time.monotonic() - entry.started
            try:
                self.backend.release(ReleaseParams(token=lease.token, now=self.app.clock()))
            except LeaseError:
                why = why_lost(self.backend, [(lease, entry.deadline)], self.app.clock())
                self.hooks.job_end(lease, JobEnd(Outcome.LEASE_LOST, ran, why[lease.token]))
            except Exception as exc:
                self.hooks.job_end(lease, JobEnd(Outcome.ERROR, ran, describe(exc), exc))
            else:
                self.hooks.job_end(lease, JobEnd(Outcome.HANDED_BACK, ran))
            finally:
                self.running.done(lease.token)
        return len(entries)

    # -- signals --------------------------------------------------------------------------

    def _install_signals(self) -> dict[signal.Signals, Handler]:
        """Signals reach ``_relay_signals`` as bytes on a pipe that Python's C-level handler
        writes (``set_wakeup_fd``): a signal delivered to another thread than the main one
        would otherwise run its Python handler only once the main thread runs again, and it
        sits blocked reading that pipe."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        self._wake_fds = (read, write)
        self._previous_wakeup_fd = signal.set_wakeup_fd(write)
        previous: dict[signal.Signals, Handler] = {}
        for signum in STOP_SIGNALS:
            previous[signum] = signal.signal(signum, _noted)
        return previous

    def _relay_signals(self) -> None:
        """Act on signals in the main thread until the worker thread says it has stopped."""
        assert self._wake_fds is not None
        while (data := os.read(self._wake_fds[0], 64)) and _DONE not in data:
            for signum in data:
                if signum in STOP_SIGNALS:  # another handler's signal may wake us too
                    self._signals += 1
                    self._handle_signal(signal.Signals(signum).name)

    def _handle_signal(self, name: str) -> None:
        if self._signals == 1:
            log.info(
                "%s received: stopping; running jobs get %.0f s to finish (send it again to "
                "hand them back now)",
                name,
                self.grace_period,
                extra={"action": "stopping"},
            )
            self.stop()
        else:
            log.warning("%s received again: handing running jobs back now", name)
            self.stop(hand_back_now=True)

    def _restore_signals(self, previous: dict[signal.Signals, Handler]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if self._wake_fds is not None:
            signal.set_wakeup_fd(self._previous_wakeup_fd)
            for fd in self._wake_fds:
                os.close(fd)
            self._wake_fds = None


def queue_order(app: App, queues: QueueOrder | str | Sequence[str] | None) -> QueueOrder:
    """The order to serve: as given, else the app's declared queues (``App.queue_order``)."""
    if isinstance(queues, QueueOrder):
        return queues
    if isinstance(queues, str):
        return QueueOrder.parse(queues)
    if queues is not None:
        return QueueOrder.strict(list(queues))
    return app.queue_order()


def _seconds(label: str, value: object, *, zero_ok: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{label} must be a number of seconds, not {value!r}")
    low_ok = value >= 0 if zero_ok else value > 0
    if not low_ok or not math.isfinite(value):
        kind = "non-negative" if zero_ok else "positive"
        raise ConfigError(f"{label} must be a {kind} finite number of seconds, not {value!r}")
    return float(value)
