"""Runs one dequeued job and stores how it ended: ack, fail with a back-off, or fail for good.

A success is buffered in ``RunningJobs`` (its slot held) for the fetch loop, which stores the
acks in batches (``completions``); failures are stored one by one with ``fail``. An ``async
def`` job's success is buffered from the event loop; its failure is stored by the fairq-report
thread, so that no store call blocks the loop. Each kind of run (a plain job, an iterative job's
slice) is written once as steps (fairq/backends/steps.py): the hooks, the timing, the result,
the cursor loop; a ``def`` job's are driven on its job thread, an ``async def`` job's awaited.

A job declared with ``result_ttl`` has its return value encoded (fairq/results.py) and kept
with its ack; a value that cannot be kept fails the attempt, as an exception would. A job asked
to stop (fairq/cancel.py; fairq/worker/cancels.py marks it) that stops by ``JobCancelled`` or,
``async``, by its cancellation, is failed with no retry: the store ends it cancelled. The job's
code sees its job through ``fairq.current_job()`` (fairq/current.py), set around its run.

A job whose name this worker's app does not declare is handed back for a worker that knows it
(``UnknownJobs``). One that cannot run at all (its payload cannot be decoded, its arguments do
not fit the function) fails at once without a retry: running it again would fail the same way.
``LeaseExpired``/``LeaseNotFound`` when storing an outcome is logged with what became of the
job (``lost.why_lost``), never raised.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import traceback
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator, Sequence
from enum import Enum
from typing import Any, TypeVar

from fairq.app import App, JobDefinition
from fairq.app.iteration import IterativeJob
from fairq.backends.steps import Steps, adrive, drive
from fairq.contract import Backend, FailParams
from fairq.current import RUNNING
from fairq.errors import JobCancelled, LeaseError
from fairq.instrument import JobEnd, Outcome
from fairq.job import JobState, Lease, decode_payload
from fairq.policy.retry import backoff
from fairq.results import JobResult, encode_result
from fairq.worker.iteration import SliceRun, Stop
from fairq.worker.joblog import ERROR_CHARS, describe, job_fields
from fairq.worker.lost import why_lost
from fairq.worker.pools import CLEANUP_WAIT, DaemonPool, LoopThread
from fairq.worker.running import Running, RunningJobs
from fairq.worker.unknown import DEFAULT_TIMEOUT, UnknownJobs

log = logging.getLogger("fairq.worker")

Prepared = tuple[JobDefinition[Any, Any], list[Any], dict[str, Any]]
#: How a job asked to stop stops: by ``fairq.current_job().raise_if_cancelled()``, or, async,
#: by the cancellation of its task.
STOPS = (JobCancelled, asyncio.CancelledError)
#: How an attempt that failed ended, by the state the store left its job in.
OUTCOMES = {JobState.DEAD: Outcome.DEAD, JobState.CANCELLED: Outcome.CANCELLED}
Shape = tuple[str, int, frozenset[str]]
MAX_SHAPES = 1024  # a job taking **kwargs fits endless shapes: remember only so many


class Step(Enum):
    """What a run asks of its driver (``JobRunner._run_sync`` on a job thread, ``_run_async``
    on the event loop; fairq.backends.steps): the one thing each does its own way."""

    CALL = "call"  # call the job's function (the reply: its return value)
    START = "start"  # an iterative job: read its cursor, start its items from it
    NEXT = "next"  # its next cursor (the reply: END when its items ended)
    SAVE = "save"  # store its progress (the reply: SliceRun.save's)
    FINISH = "finish"  # store its last progress (SliceRun.finish)
    CLOSE = "close"  # close its items


#: The reply to ``Step.NEXT`` once an iterative job's items ended.
END = object()
T = TypeVar("T")
#: How a run ended: its error (None: it returned), how long it ran, and what its steps returned.
Ran = tuple[BaseException | None, float, T | None]


class JobRunner:
    """Starts jobs on the right pool and stores their outcomes. One per worker."""

    def __init__(
        self,
        app: App,
        running: RunningJobs,
        *,
        app_name: str,
        clock: Callable[[], float],
        unknown_job_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.app = app
        self.backend: Backend = app.timed_backend
        self.hooks = app.hooks
        self.running = running
        self.app_name = app_name
        self.clock = clock
        self._threads = DaemonPool(running.capacity, "fairq-job")
        self._reporter = DaemonPool(1, "fairq-report")  # stores async jobs' failures off the loop
        self._loop: LoopThread | None = None  # started with the first async job
        self._fits: set[Shape] = set()  # argument shapes known to bind (see _check_fit)
        self.unknown = UnknownJobs(
            self.backend,
            clock=clock,
            timeout=unknown_job_timeout,
            app_name=app_name,
            declared=app.jobs,
            hooks=self.hooks,
        )

    def start(self, leases: Sequence[Lease]) -> list[Callable[[], None]]:
        """Take the jobs' slots and start them, except the ``def`` jobs: those come back as
        calls for the caller to run on job threads (``on_a_job_thread``, or its own). The
        ``async def`` jobs go to the event loop together, one wake-up for them all; a job that
        can never run here is failed. Called by one thread at a time (under the fetch loop's
        gate)."""
        calls: list[Callable[[], None]] = []
        entries: list[Running] = []
        coros: list[Coroutine[Any, Any, None]] = []
        for lease in leases:
            entry = self.running.add(lease)
            if lease.name not in self.app.jobs:
                calls.append(functools.partial(self._hand_back_unknown, entry))
                continue
            prepared = self._prepare(lease)
            if isinstance(prepared, str):
                self._reject(entry, prepared)
            elif isinstance(prepared[0], IterativeJob):
                if prepared[0].is_async:
                    entries.append(entry)
                    coros.append(self._iterate_async(entry, prepared[0], *prepared[1:]))
                else:
                    calls.append(
                        functools.partial(self._iterate, entry, prepared[0], *prepared[1:])
                    )
            elif prepared[0].is_async:
                entries.append(entry)
                coros.append(self._run_async(entry, *prepared))
            else:
                calls.append(functools.partial(self._run_sync, entry, *prepared))
        if coros:
            if self._loop is None:
                self._loop = LoopThread("fairq-async")
            for entry, cancel in zip(entries, self._loop.start(coros), strict=True):
                entry.cancel = cancel
                entry.interrupt = functools.partial(self._interrupt, self._loop, entry)
        return calls

    @staticmethod
    def _interrupt(loop: LoopThread, entry: Running) -> None:
        """A cancel request for an async job: cancel its task on the loop (one that has not
        started yet finds the request when it starts: ``_stop_if_asked``)."""
        loop.loop.call_soon_threadsafe(lambda: entry.task.cancel() if entry.task else None)

    def on_a_job_thread(self, task: Callable[[], None]) -> None:
        """Run ``task`` on one of the job threads (the fetch loop waits there for new work)."""
        self._threads.submit(task)

    def shutdown(self) -> None:
        """Let the pools' threads go. Jobs still running are abandoned (already handed back)."""
        self._threads.shutdown()
        self._reporter.shutdown()
        if self._loop is not None and not self._loop.shutdown():
            log.warning(
                "stopping: an async job did not end within %.0f s of being cancelled (does it "
                "block the event loop?); the process may end it mid-way",
                CLEANUP_WAIT,
                extra={"action": "async_cleanup_late"},
            )

    # -- before running -------------------------------------------------------------------

    def _prepare(self, lease: Lease) -> Prepared | str:
        """The job's definition and arguments, or why the job can never run here."""
        definition = self.app.jobs[lease.name]
        try:
            args, kwargs = decode_payload(lease.payload)
        except Exception as exc:
            return f"the payload of job {lease.name!r} cannot be decoded ({describe(exc)})"
        try:
            self._check_fit(definition, args, kwargs)
        except TypeError as exc:
            signature = f"{lease.name}{definition.signature}"
            return f"the stored arguments do not fit job {signature}: {exc}"
        return definition, args, kwargs

    def _check_fit(
        self, definition: JobDefinition[Any, Any], args: list[Any], kwargs: dict[str, Any]
    ) -> None:
        """Raise TypeError if the arguments do not fit the function. Whether they fit depends
        only on how many positional ones there are and the keywords' names, so each such shape
        is bound once per job name."""
        shape = (definition.name, len(args), frozenset(kwargs))
        if shape not in self._fits:
            definition.signature.bind(*args, **kwargs)
            if len(self._fits) < MAX_SHAPES:
                self._fits.add(shape)

    def _hand_back_unknown(self, entry: Running) -> None:
        if self.running.claim(entry.lease.token) is None:
            return
        try:
            self.unknown.handle(entry.lease, entry.deadline)
        finally:
            self.running.done(entry.lease.token)

    def _reject(self, entry: Running, reason: str) -> None:
        if self.running.claim(entry.lease.token) is None:
            return
        try:
            self._store_failure(entry, reason, retry_at=None, exc=None)
        finally:
            self.running.done(entry.lease.token)

    # -- running: each kind of run written once as steps, driven on a thread or awaited -------

    def _run_sync(
        self,
        entry: Running,
        definition: JobDefinition[Any, Any],
        args: list[Any],
        kwargs: dict[str, Any],
    ) -> None:
        def call(_: Step) -> Any:
            running = RUNNING.set(entry)
            try:
                return definition.fn(*args, **kwargs)
            finally:
                RUNNING.reset(running)

        error, duration, _ = drive(self._timed(entry, definition), call)
        self._finish(entry, definition, error, duration)

    async def _run_async(
        self,
        entry: Running,
        definition: JobDefinition[Any, Any],
        args: list[Any],
        kwargs: dict[str, Any],
    ) -> None:
        async def call(_: Step) -> Any:
            RUNNING.set(entry)  # the task's own context: nothing to reset
            self._stop_if_asked(entry)
            return await definition.fn(*args, **kwargs)

        error, duration, _ = await adrive(self._timed(entry, definition), call)
        if error is None:  # only buffered for the next ack: no store call blocks the loop
            self._finish(entry, definition, error, duration)
        else:
            self._reporter.submit(lambda: self._finish(entry, definition, error, duration))

    def _iterate(
        self,
        entry: Running,
        definition: IterativeJob[Any],
        args: list[Any],
        kwargs: dict[str, Any],
    ) -> None:
        """An iterative job's slice (fairq/worker/iteration.py) on a job thread."""
        run = SliceRun(self.backend, self.running, self.hooks, self.clock, entry, definition)
        items: Generator[Any, None, None] | None = None

        def perform(step: Step) -> Any:
            nonlocal items
            running = RUNNING.set(entry)
            try:
                if step is Step.START:
                    started = definition.iterate(run.resume(), *args, **kwargs)
                    assert isinstance(started, Generator)
                    items = started
                    return None
                assert items is not None
                if step is Step.NEXT:
                    return next(items, END)
                if step is Step.CLOSE:
                    return items.close()
                return run.save() if step is Step.SAVE else run.finish()
            finally:
                RUNNING.reset(running)

        error, duration, stop = drive(self._timed(entry, definition, self._slice(run)), perform)
        if stop is None or error is not None:
            self._finish(entry, definition, error, duration)
        else:
            run.hand_back(stop, duration)

    async def _iterate_async(
        self,
        entry: Running,
        definition: IterativeJob[Any],
        args: list[Any],
        kwargs: dict[str, Any],
    ) -> None:
        """As ``_iterate``; its store calls run on threads, never on the event loop."""
        run = SliceRun(self.backend, self.running, self.hooks, self.clock, entry, definition)
        items: AsyncGenerator[Any, None] | None = None

        async def perform(step: Step) -> Any:
            nonlocal items
            if step is Step.START:
                RUNNING.set(entry)  # the task's own context: nothing to reset
                self._stop_if_asked(entry)
                cursor = await asyncio.to_thread(run.resume)
                started = definition.iterate(cursor, *args, **kwargs)
                assert isinstance(started, AsyncGenerator)
                items = started
                return None
            assert items is not None
            if step is Step.NEXT:
                return await anext(items, END)
            if step is Step.CLOSE:
                return await items.aclose()
            return await asyncio.to_thread(run.save if step is Step.SAVE else run.finish)

        error, duration, stop = await adrive(
            self._timed(entry, definition, self._slice(run)), perform
        )
        if error is None and stop is None:
            self._finish(entry, definition, error, duration)
        elif error is not None:
            self._reporter.submit(lambda: self._finish(entry, definition, error, duration))
        elif stop is not None:
            ended = stop
            self._reporter.submit(lambda: run.hand_back(ended, duration))

    @staticmethod
    def _slice(run: SliceRun) -> Steps[Step, Stop | None]:
        """One slice of an iterative job: its items from the stored cursor, a checkpoint when
        due, until they end (then the last progress is stored) or the slice stops (``Stop``)."""
        stop: Stop | None = None
        yield Step.START
        try:
            while (cursor := (yield Step.NEXT)) is not END:
                stop = run.advance(cursor)
                if stop is Stop.CHECKPOINT:
                    stop = yield Step.SAVE
                if stop is not None:
                    break
        finally:
            yield Step.CLOSE
        if stop is None:
            yield Step.FINISH
        return stop

    def _timed(
        self,
        entry: Running,
        definition: JobDefinition[Any, Any],
        steps: Steps[Step, T] | None = None,
    ) -> Steps[Step, Ran[T]]:
        """A run between the seam's ``before_run`` and ``after_run``, timed: a plain job's (it
        asks once, for the call itself, and keeps its return value), or an iterative job's
        ``steps``. Returns how it ended (None: it returned), how long it ran, and what the
        steps returned."""
        hooks = self.hooks if self.hooks.wants_run else None
        if hooks is not None:
            hooks.before_run(entry.lease)
        started = time.monotonic()
        error: BaseException | None = None
        result: T | None = None
        try:
            if steps is not None:
                result = yield from steps
            else:
                value = yield Step.CALL
                if definition.result_ttl is not None:
                    entry.result = self._result(entry, definition.result_ttl, value)
        except BaseException as exc:  # any way out of the job is its outcome (cancelled too)
            error = exc
        duration = time.monotonic() - started
        if hooks is not None:
            hooks.after_run(entry.lease, error, duration)
        return error, duration, result

    # -- results and cancel requests ---------------------------------------------------------

    def _result(self, entry: Running, keep: float, value: object) -> JobResult:
        """The return value to keep with the ack; ResultError (a failed attempt) if it cannot."""
        lease = entry.lease
        limit = self.app.max_payload_bytes
        text = encode_result(value, name=lease.name, job_id=lease.job_id, max_bytes=limit)
        return JobResult(value=text, keep=keep)

    @staticmethod
    def _stop_if_asked(entry: Running) -> None:
        """An async job asked to stop before its task started: it stops at once. (Its task,
        found here, is cancelled by any later request: ``_interrupt``.)"""
        entry.task = asyncio.current_task()
        if entry.cancel_requested:
            raise asyncio.CancelledError

    # -- after running --------------------------------------------------------------------

    def _finish(
        self,
        entry: Running,
        definition: JobDefinition[Any, Any],
        error: BaseException | None,
        duration: float,
    ) -> None:
        entry.duration = duration
        if self.running.claim(entry.lease.token) is None:
            log.debug(
                "job %s ended after it was handed back; outcome not stored",
                entry.lease.job_id,
                extra=job_fields(entry.lease, "discard"),
            )
            return
        if error is None:
            if not self.running.succeeded(entry):  # the fetch loop stores its ack
                why = "it ended after the worker stopped storing outcomes; it runs again"
                self.hooks.job_end(entry.lease, JobEnd(Outcome.ERROR, duration, why))
                self.running.done(entry.lease.token)
            return
        try:
            if entry.cancel_requested and isinstance(error, STOPS):
                # it stopped on the request: no retry (the store ends it cancelled), and no
                # traceback, which would only show where it stopped
                why = f"cancelled on request ({describe(error)})"
                self._store_failure(entry, why, retry_at=None, exc=None)
                return
            retry_at = self.clock() + backoff(entry.lease.attempt, base=definition.retry_base)
            self._store_failure(entry, describe(error), retry_at=retry_at, exc=error)
        finally:
            self.running.done(entry.lease.token)

    def _store_failure(
        self, entry: Running, error: str, *, retry_at: float | None, exc: BaseException | None
    ) -> None:
        lease = entry.lease
        stored = error
        if exc is not None:
            stored += "\n\n" + "".join(traceback.format_exception(exc)).rstrip()
        params = FailParams(
            token=lease.token, now=self.clock(), error=_cut(stored), retry_at=retry_at
        )
        try:
            info = self.backend.fail(params)
        except LeaseError:
            why = why_lost(self.backend, [(lease, entry.deadline)], self.clock())[lease.token]
            end = JobEnd(Outcome.LEASE_LOST, entry.duration, f"{error}; {why}", exc)
            self.hooks.job_end(lease, end)
            return
        except Exception as failed:
            end = JobEnd(Outcome.ERROR, entry.duration, describe(failed), failed)
            self.hooks.job_end(lease, end)
            return
        outcome = OUTCOMES.get(info.state, Outcome.RETRYING)
        self.hooks.job_end(lease, JobEnd(outcome, entry.duration, error, exc))


def _cut(text: str) -> str:
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"
