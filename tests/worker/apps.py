"""Jobs the worker tests run. Importable as ``tests.worker.apps:app`` by a worker process.

The store is ``$FAIRQ_TEST_URL`` (set by the test that starts the worker). Jobs report what they
do through files under the ``workdir`` they are given, so a test can see overlap, order and
which process ran a job, without timing anything. Every wait inside a job is bounded, so a
broken worker fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import fairq
from fairq import App

JOB_DEADLINE = 60.0  # the longest any job waits for a condition before giving up


def make_app(url: str) -> App:
    app = App(url)

    @app.job(name="record", tenant="tenant")
    def record(tenant: str, workdir: str, tag: str) -> None:
        _mark(workdir, "done", tag)

    @app.job(name="record_async", tenant="tenant")
    async def record_async(tenant: str, workdir: str, tag: str) -> None:
        await asyncio.sleep(0)
        _mark(workdir, "done", tag)

    @app.job(name="append", tenant="tenant")
    def append(tenant: str, workdir: str, tag: str) -> None:
        with open(Path(workdir) / "order.txt", "a") as out:
            out.write(tag + "\n")

    @app.job(name="explode", tenant="tenant", max_attempts=2, retry_base=0.05)
    def explode(tenant: str, message: str) -> None:
        raise ValueError(message)

    @app.job(name="explode_async", tenant="tenant", max_attempts=2, retry_base=0.05)
    async def explode_async(tenant: str, message: str) -> None:
        raise ValueError(message)

    @app.job(name="rendezvous", tenant="tenant")
    def rendezvous(tenant: str, workdir: str, tag: str, n: int) -> None:
        """Finish only once ``n`` rendezvous jobs have started: proves they ran at once."""
        _mark(workdir, "started", tag)
        _wait(lambda: len(list((Path(workdir) / "started").iterdir())) >= n, f"{n} at once")
        _mark(workdir, "done", tag)

    @app.job(name="rendezvous_async", tenant="tenant")
    async def rendezvous_async(tenant: str, workdir: str, tag: str, n: int) -> None:
        _mark(workdir, "started", tag)
        deadline = time.monotonic() + JOB_DEADLINE
        while len(list((Path(workdir) / "started").iterdir())) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} jobs never ran at once")
            await asyncio.sleep(0.01)
        _mark(workdir, "done", tag)

    @app.job(name="block", tenant="tenant")
    def block(tenant: str, workdir: str, tag: str) -> None:
        """Run until the test creates ``go/<tag>``."""
        _mark(workdir, "started", tag)
        _wait(lambda: (Path(workdir) / "go" / tag).exists(), f"go/{tag}")
        _mark(workdir, "done", tag)

    @app.job(name="block_short_lease", tenant="tenant", lease=1.0)
    def block_short_lease(tenant: str, workdir: str, tag: str) -> None:
        """``block`` with a 1 s lease: it outlives its lease unless heartbeats extend it."""
        block(tenant, workdir, tag)

    @app.job(name="block_async", tenant="tenant")
    async def block_async(tenant: str, workdir: str, tag: str) -> None:
        """``block`` for the event loop; marks ``cancelled/<tag>`` if it is cancelled."""
        _mark(workdir, "started", tag)
        try:
            while not (Path(workdir) / "go" / tag).exists():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            _mark(workdir, "cancelled", tag)
            raise
        _mark(workdir, "done", tag)

    @app.job(name="first_run_hangs", tenant="tenant", lease=1.0)
    def first_run_hangs(tenant: str, workdir: str, tag: str) -> None:
        """The first run hangs (the test kills its worker); any later run completes."""
        if _mark(workdir, "started", tag):
            _wait(lambda: False, "a kill that never came")
        _mark(workdir, "done", tag)

    @app.iterative_job(name="count_up", tenant="tenant", lease=1.0, checkpoint_items=5)
    def count_up(
        cursor: int | None, tenant: str, workdir: str, total: int, pause_at: int
    ) -> Iterator[int]:
        """Items ``cursor`` … ``total - 1``, each appended to ``items.txt`` as it runs. Item
        ``pause_at`` marks ``paused/<item>`` and waits for ``go/pause`` (a test stops the
        worker there, between checkpoints: they come every 5 items)."""
        for item in range(cursor or 0, total):
            with open(Path(workdir) / "items.txt", "a") as out:
                out.write(f"{item}\n")
            if item == pause_at:
                _mark(workdir, "paused", str(item))
                _wait(lambda: (Path(workdir) / "go" / "pause").exists(), "go/pause")
            yield item + 1

    @app.job(name="until_cancelled", tenant="tenant", lease=2.0, max_attempts=3)
    def until_cancelled(tenant: str, workdir: str, tag: str) -> None:
        """Run until asked to stop (its heartbeat, every third of its lease, brings the request),
        looking between steps as a long ``def`` job would; marks ``stopped/<tag>`` then."""
        _mark(workdir, "started", tag)
        try:
            _wait(lambda: fairq.current_job().cancel_requested, "a cancel request")
            fairq.current_job().raise_if_cancelled()
        except fairq.JobCancelled:
            _mark(workdir, "stopped", tag)
            raise

    @app.job(name="until_cancelled_async", tenant="tenant", lease=2.0)
    async def until_cancelled_async(tenant: str, workdir: str, tag: str) -> None:
        """Wait on the event loop until cancelled; marks ``cancelled/<tag>`` then."""
        _mark(workdir, "started", tag)
        try:
            await asyncio.sleep(JOB_DEADLINE)
        except asyncio.CancelledError:
            _mark(workdir, "cancelled", tag)
            raise
        raise TimeoutError("never cancelled")

    @app.iterative_job(name="count_until_cancelled", tenant="tenant", lease=2.0)
    def count_until_cancelled(cursor: int | None, tenant: str, workdir: str) -> Iterator[int]:
        """Yield 1, 2, … until the worker stops it at a cursor after a cancel request."""
        item = cursor or 0
        deadline = time.monotonic() + JOB_DEADLINE
        while time.monotonic() < deadline:
            item += 1
            if item == 3:
                _mark(workdir, "started", "count")
            time.sleep(0.01)
            yield item
        raise TimeoutError("never stopped")

    @app.job(name="answer", tenant="tenant", result_ttl=3600.0)
    def answer(tenant: str, n: int) -> dict[str, object]:
        return {"n": n, "squares": [i * i for i in range(n)], "tenant": tenant}

    @app.job(name="answer_async", tenant="tenant", result_ttl=3600.0)
    async def answer_async(tenant: str, n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    @app.job(name="bad_answer", tenant="tenant", result_ttl=3600.0, max_attempts=2, retry_base=0.05)
    def bad_answer(tenant: str) -> object:
        return {1, 2}

    return app


def _mark(workdir: str, kind: str, tag: str) -> bool:
    """Create ``workdir/kind/tag`` holding this process's id; False if it already existed."""
    folder = Path(workdir) / kind
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with open(folder / tag, "x") as out:
            out.write(str(os.getpid()))
    except FileExistsError:
        return False
    return True


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + JOB_DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.01)


app = make_app(os.environ.get("FAIRQ_TEST_URL", "memory://"))
