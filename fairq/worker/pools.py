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
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

log = logging.getLogger("fairq.worker")


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
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def start(self, coros: Sequence[Coroutine[Any, Any, None]]) -> list[Callable[[], None]]:
        """Run each coroutine as a task, all of them started by one wake-up of the loop (a
        wake-up per job cost more CPU than a short job). Returns, for each, a call that
        cancels it from any thread."""
        tasks: list[asyncio.Task[None]] = []
        self.loop.call_soon_threadsafe(lambda: tasks.extend(map(self.loop.create_task, coros)))
        return [functools.partial(self._cancel, tasks, index) for index in range(len(coros))]

    def _cancel(self, tasks: list[asyncio.Task[None]], index: int) -> None:
        # The loop runs this after the callback that creates the tasks (callbacks run in the
        # order they were given), so the task exists by then.
        self.loop.call_soon_threadsafe(lambda: tasks[index].cancel())

    def shutdown(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            self._cancel_leftovers()
        finally:
            self.loop.close()

    def _cancel_leftovers(self) -> None:
        """Cancel jobs still running at stop (they were handed back) and give them a moment."""
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
