"""Where job code runs: daemon threads for ``def`` jobs, one event loop thread for ``async def``.

Both use daemon threads on purpose: a job handed back at shutdown may still be running, and it
must not keep the process alive (concurrent.futures' pools are joined at interpreter exit).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

log = logging.getLogger("fairq.worker")

CLEANUP_WAIT = 1.0  # seconds the async jobs still running at shutdown get to end once cancelled


class DaemonPool:
    """Up to ``size`` daemon threads running submitted callables in order of submission.

    Threads start on demand, so a worker whose jobs are all ``async def`` does not keep
    ``concurrency`` idle threads.
    """

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            if self._idle == 0 and self._threads < self.size:
                self._threads += 1
                self._idle += 1
                name = f"{self.name}-{self._threads}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
            self._idle -= 1
        self._tasks.put(task)

    def shutdown(self) -> None:
        """Let each thread exit once the tasks before this call are done (does not wait)."""
        with self._lock:
            for _ in range(self._threads):
                self._tasks.put(None)

    def _serve(self) -> None:
        while (task := self._tasks.get()) is not None:
            try:
                task()
            except BaseException:  # a task must never take its thread down with it
                log.exception("internal error in worker thread")
            with self._lock:
                self._idle += 1


class LoopThread:
    """One asyncio event loop on its own daemon thread, for ``async def`` jobs."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._cancelled: weakref.WeakSet[asyncio.Task[None]] = weakref.WeakSet()  # loop's own
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def start(self, coros: Sequence[Coroutine[Any, Any, None]]) -> list[Callable[[], None]]:
        """Run each coroutine as a task, all of them started by one wake-up of the loop (a
        wake-up per job cost more CPU than a short job). Returns, for each, a call that
        cancels it from any thread; one cancelled before its task's first step never runs."""
        batch = _Batch(coros)
        self.loop.call_soon_threadsafe(batch.create, self.loop)
        return [functools.partial(self._cancel, batch, index) for index in range(len(coros))]

    def _cancel(self, batch: _Batch, index: int) -> None:
        batch.cancelled[index] = True  # at once: the task's first step may already be queued
        self.loop.call_soon_threadsafe(self._cancel_started, batch, index)

    def _cancel_started(self, batch: _Batch, index: int) -> None:
        """On the loop: cancel the job if it has started (if not, it never will)."""
        if batch.started[index]:
            task = batch.tasks[index]
            task.cancel()
            self._cancelled.add(task)

    def shutdown(self) -> bool:
        """Stop the loop, cancel the jobs still on it and wait for them to end (at most
        ``CLEANUP_WAIT``, and a margin): a daemon thread would otherwise be cut off mid-cleanup
        when the process ends. False when the thread did not end in time (a job blocks it)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CLEANUP_WAIT + 1.0)
        return not self._thread.is_alive()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            self._cancel_leftovers()
        finally:
            self.loop.close()

    def _cancel_leftovers(self) -> None:
        """Cancel jobs still running at stop and give them a moment to clean up. Those handed
        back are being cancelled already: cancelling them again would interrupt their cleanup."""
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            if task not in self._cancelled:
                task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.wait(tasks, timeout=CLEANUP_WAIT))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())


class _Batch:
    """The tasks of one ``LoopThread.start``. A cancel sets its flag from any thread, then
    asks the loop to cancel the task, which exists by then (callbacks run in the order they
    were given) but may not have taken its first step: that step finds the flag and closes
    the job unstarted; the loop cancels only a task that has started."""

    def __init__(self, coros: Sequence[Coroutine[Any, Any, None]]) -> None:
        self.coros = coros
        self.tasks: list[asyncio.Task[None]] = []
        self.cancelled = [False] * len(coros)
        self.started = [False] * len(coros)

    def create(self, loop: asyncio.AbstractEventLoop) -> None:
        self.tasks = [loop.create_task(self._run(index)) for index in range(len(self.coros))]

    async def _run(self, index: int) -> None:
        coro = self.coros[index]
        if self.cancelled[index]:
            coro.close()
            return
        self.started[index] = True
        await coro
