"""The event loop thread that runs ``async def`` jobs: batches started together, cancelled one
by one from other threads."""

from __future__ import annotations

import asyncio
import queue

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


def test_a_job_cancelled_before_the_loop_took_its_batch_never_runs() -> None:
    """Shutdown may hand a job back right after it was started: the cancel is queued behind
    the batch's start, so the task exists, and it ends before its first line."""
    ran: queue.SimpleQueue[str] = queue.SimpleQueue()

    async def job(tag: str) -> None:
        ran.put(tag)

    loop = LoopThread("test-loop")
    try:
        (cancel,) = loop.start([job("cancelled")])
        cancel()
        loop.start([job("after")])  # runs after the cancel: callbacks run in order
        assert ran.get(timeout=DEADLINE) == "after"
        assert ran.empty()
    finally:
        loop.shutdown()
