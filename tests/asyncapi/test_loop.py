"""The event loop is never blocked by a store: an enqueue that waits on PostgreSQL leaves the
loop to run other tasks; and a server store's async connections stay in their own loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conformance.conftest import BACKENDS
from postgres._store import DisposableBackend, open_disposable

from fairq import App, JobState
from fairq.errors import ConfigError

from .conftest import NOW


@pytest.fixture
def pg_app() -> Iterator[tuple[App, DisposableBackend]]:
    backend = open_disposable(clock="caller")
    app = App("memory://", backend=backend, clock=lambda: NOW)

    @app.job(tenant="account", name="tests.work")
    def work(account: str, n: int) -> None: ...

    yield app, backend
    backend.close()


BLOCKED_BY = "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"


def test_enqueue_waiting_on_a_lock_leaves_the_loop_free(
    pg_app: tuple[App, DisposableBackend],
) -> None:
    """Another connection holds the queue's lock: the async enqueue waits for it on the
    server while this loop runs another coroutine, which sees the enqueue's session blocked
    by the holder and then releases the lock. Were the enqueue blocking the loop, that
    coroutine could not run until the lock went; the safety valve releases it after 20 s
    and the test fails on what the coroutine saw."""
    app, backend = pg_app
    work = app.jobs["tests.work"]
    holder = psycopg.connect(backend.url.conninfo, options="-c fairq.clock=caller")
    args = {"names": ["default"], "seed": backend.seed, "now": NOW}
    holder.execute(backend.q["lock_queues_exclusive"], args)  # held until rollback
    valve = threading.Timer(20.0, holder.rollback)
    valve.start()

    async def scenario() -> tuple[list[int], bool, str]:
        task = asyncio.create_task(work.aenqueue("acme", 1))
        observer = await psycopg.AsyncConnection.connect(backend.url.conninfo, autocommit=True)
        try:
            blocked: list[int] = []
            for _ in range(6000):  # until the enqueue's session waits on the holder
                found = await observer.execute(BLOCKED_BY, (holder.info.backend_pid,))
                blocked = [row[0] for row in await found.fetchall()]
                if blocked or task.done():
                    break
                await asyncio.sleep(0.01)
            pending = not task.done()
            valve.cancel()
            holder.rollback()
            return blocked, pending, await task
        finally:
            await observer.close()
            await app.aclose(blocking=False)

    try:
        blocked, pending, job_id = asyncio.run(scenario())
    finally:
        valve.cancel()
        holder.close()
    assert blocked, "the enqueue never waited on the lock while this loop ran"
    assert pending
    info = app.job_info(job_id)
    assert info is not None and info.state is JobState.READY


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_async_store_belongs_to_the_loop_that_opened_it(kind: str, tmp_path: Path) -> None:
    backend = BACKENDS[kind](tmp_path)
    app = App("memory://", backend=backend, clock=lambda: NOW)
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        assert first.run_until_complete(app.astats()) == []
        with pytest.raises(ConfigError, match="another event loop"):
            second.run_until_complete(app.astats())
        first.run_until_complete(app.aclose(blocking=False))
        assert second.run_until_complete(app.astats()) == []  # opened anew in this loop
        second.run_until_complete(app.aclose(blocking=False))
    finally:
        first.close()
        second.close()
        backend.close()
