"""The event loop thread that runs ``async def`` jobs: batches started together, cancelled one
by one from other threads."""

from __future__ import annotations

import asyncio
import queue
import threading

from fairq.worker.pools import LoopThread

DEADLINE = 30.0  # only so a broken loop fails the test instead of hanging it


def test_each_job_of_a_batch_can_be_cancelled_from_another_thread() -> None:
    ended: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()

    async def job(tag: str, wait: bool) -> None:
        try:
            if wait:
                await asyncio.Event().wait()
        except asyncio.CancelledError:
            ended.put((tag, "cancelled"))
            raise
        ended.put((tag, "done"))

    loop = LoopThread("test-loop")
    try:
        cancels = loop.start([job("a", False), job("b", True), job("c", True)])
        assert ended.get(timeout=DEADLINE) == ("a", "done")
        cancels[1]()
        assert ended.get(timeout=DEADLINE) == ("b", "cancelled")
        cancels[0]()  # already done: changes nothing
        cancels[2]()
        assert ended.get(timeout=DEADLINE) == ("c", "cancelled")
    finally:
        loop.shutdown()


class Recorder:
    """Jobs that only record that they ran."""

    def __init__(self) -> None:
        self.ran: queue.SimpleQueue[str] = queue.SimpleQueue()

    async def job(self, tag: str) -> None:
        self.ran.put(tag)


def test_a_job_cancelled_before_the_loop_took_its_batch_never_runs() -> None:
    """Shutdown may hand a job back right after it was started, before the loop took its
    batch: it never runs (the loop is held busy here until the cancel is in)."""
    jobs, busy = Recorder(), threading.Event()
    loop = LoopThread("test-loop")
    try:
        loop.loop.call_soon_threadsafe(busy.wait, DEADLINE)
        (cancel,) = loop.start([jobs.job("cancelled")])
        cancel()
        loop.start([jobs.job("after")])
        busy.set()
        assert jobs.ran.get(timeout=DEADLINE) == "after"
        assert jobs.ran.empty()
    finally:
        loop.shutdown()


def test_a_cancel_queued_behind_the_first_step_of_its_job_still_stops_it() -> None:
    """The loop may create a batch's task, queue its first step, then get the cancel: the
    cancel flag stops the job at that step, before its first line."""
    jobs = Recorder()
    busy, created, go = threading.Event(), threading.Event(), threading.Event()
    loop = LoopThread("test-loop")
    try:
        loop.loop.call_soon_threadsafe(busy.wait, DEADLINE)
        (cancel,) = loop.start([jobs.job("cancelled")])
        # Runs in the loop's next round with the batch's creation, after it and before the
        # task's first step (queued by the creation): it holds the loop there.
        loop.loop.call_soon_threadsafe(lambda: (created.set(), go.wait(DEADLINE)))
        busy.set()
        assert created.wait(DEADLINE)
        cancel()
        go.set()
        loop.start([jobs.job("after")])
        assert jobs.ran.get(timeout=DEADLINE) == "after"
        assert jobs.ran.empty()
    finally:
        loop.shutdown()
