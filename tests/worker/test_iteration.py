"""Iterative jobs on an in-process worker, on every store: slices hand
the worker to other tenants, runs resume from their cursor, a stop checkpoints and hands back,
bad cursors and bad settings are refused. Real processes: test_iteration_processes.py."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from fairq import App, ConfigError, JobState, Lease, Progress
from fairq.contract import ReleaseParams
from fairq.instrument import JobEnd, Middleware, Outcome
from fairq.worker import Worker

from .helpers import job, wait_for, wait_state


class Ends(Middleware):
    """Every job end and checkpoint, in order."""

    def __init__(self) -> None:
        self.ends: list[tuple[str, Outcome]] = []
        self.checkpoints: list[Progress] = []

    def after_job(self, lease: Lease, end: JobEnd) -> None:
        self.ends.append((lease.name, end.outcome))

    def after_checkpoint(self, lease: Lease, progress: Progress) -> None:
        self.checkpoints.append(progress)


def _redis(tmp: Path) -> App:
    url = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    return App(f"{url}?prefix=it{uuid.uuid4().hex[:8]}")


def _postgres(tmp: Path) -> App:
    from postgres._store import open_disposable

    return App(backend=open_disposable(clock="store"))


STORES: dict[str, Callable[[Path], App]] = {
    "model": lambda tmp: App("memory://"),
    "sqlite": lambda tmp: App(f"sqlite:///{tmp / 'q.db'}"),
    "redis": _redis,
    "postgres": _postgres,
}


@pytest.fixture(params=list(STORES))
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    app = STORES[request.param](tmp_path)
    yield app
    app.close()


def test_a_long_iteration_gives_the_worker_to_another_tenant_after_one_slice(app: App) -> None:
    events: list[tuple[str, int]] = []
    b_done = threading.Event()
    ends = Ends()
    app.add_middleware(ends)

    @app.iterative_job(name="export", tenant="tenant", slice=0.2, checkpoint_items=10**9)
    def export(cursor: int | None, tenant: str) -> Iterator[int]:
        start = cursor or 0
        events.append(("a-run", start))
        item = start
        while not (b_done.is_set() and item > start):  # only a slice's end stops a first run
            item += 1
            yield item

    @app.job(name="short", tenant="tenant")
    def short(tenant: str, n: int) -> None:
        events.append(("b", n))
        if n == 2:
            b_done.set()

    export_id = export.enqueue("a")
    for n in range(3):
        short.enqueue("b", n)
    with Worker(app, concurrency=1).in_thread():
        info = wait_state(app, export_id, JobState.SUCCEEDED)

    # A ran first (the oldest job); its slice's end let B's jobs run before A's next slice.
    assert events[:4] == [("a-run", 0), ("b", 0), ("b", 1), ("b", 2)]
    runs = [start for kind, start in events if kind == "a-run"]
    assert len(runs) >= 2 and runs == sorted(set(runs))  # each run resumed further on
    # Every item ran once: the cursor counts them, and so does the progress. (The last
    # checkpoint, stored before the ack: a succeeded job's progress may be dropped.)
    last = ends.checkpoints[-1]
    assert last.items == last.cursor
    assert last.slices == len(runs) - 1
    assert info.progress in (None, last)
    assert ("export", Outcome.SLICE_ENDED) in ends.ends
    assert ends.ends[-1] == ("export", Outcome.SUCCEEDED)
    assert [p.slices for p in ends.checkpoints] == sorted(p.slices for p in ends.checkpoints)


def test_a_slices_end_is_logged_as_a_note_not_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The end of a slice is the plan, not a failure: ``note=``, and the record's ``error``
    is None (a JSON handler would count it as an error otherwise)."""
    app = App(f"sqlite:///{tmp_path / 'q.db'}")

    @app.iterative_job(name="count", tenant="tenant", slice=0.05)
    def count(cursor: int | None, tenant: str) -> Iterator[int]:
        item = cursor or 0
        while cursor is None or item < cursor + 1:  # a first run goes on until its slice ends
            item += 1
            yield item

    job_id = count.enqueue("a")
    with caplog.at_level(logging.INFO, logger="fairq.worker"), Worker(app).in_thread():
        wait_state(app, job_id, JobState.SUCCEEDED)
    app.close()
    (ended,) = [r for r in caplog.records if getattr(r, "outcome", None) == "slice_ended"]
    assert " note=its time slice (0.05 s) was used up after " in ended.getMessage()
    assert "error=" not in ended.getMessage()
    assert ended.error is None  # type: ignore[attr-defined]
    assert ended.note.startswith("its time slice")  # type: ignore[attr-defined]


def test_an_async_iteration_resumes_from_its_cursor(app: App) -> None:
    ends = Ends()
    app.add_middleware(ends)

    @app.iterative_job(name="export_async", tenant="tenant", slice=0.05, checkpoint_items=7)
    async def export_async(cursor: int | None, tenant: str, total: int) -> AsyncIterator[int]:
        item = cursor or 0
        while True:  # a first run goes on until its slice ends
            await asyncio.sleep(0)
            item += 1
            yield item
            if cursor is not None and item >= total:
                return

    job_id = export_async.enqueue("a", 10)
    with Worker(app, concurrency=2).in_thread():
        info = wait_state(app, job_id, JobState.SUCCEEDED)
    last = ends.checkpoints[-1]
    assert last.slices >= 1
    assert last.items == last.cursor >= 10
    assert info.attempts == 1


def test_a_stopping_worker_checkpoints_and_hands_the_iteration_back_at_once(app: App) -> None:
    started = threading.Event()
    ends = Ends()
    app.add_middleware(ends)

    @app.iterative_job(name="forever", tenant="tenant", checkpoint_items=10**9)
    def forever(cursor: int | None, tenant: str) -> Iterator[int]:
        item = cursor or 0
        while True:
            item += 1
            if item == 50:
                started.set()
            yield item
            if cursor is not None:
                return  # a resumed run finishes

    job_id = forever.enqueue("a")
    worker = Worker(app, concurrency=1, grace_period=20.0)
    with worker.in_thread():
        wait_for(started.is_set, "the iteration to start")
        worker.stop()  # the job hands back at once; without a checkpoint, after the grace period
    info = job(app, job_id)
    assert (info.state, info.attempts) == (JobState.READY, 0)
    assert info.progress is not None
    # Checkpointed at the stop (checkpoint_items alone would never have), one slice done.
    assert info.progress.items == info.progress.cursor >= 50
    assert info.progress.slices == 1
    stopped_at = info.progress.cursor
    with Worker(app, concurrency=1).in_thread():
        wait_state(app, job_id, JobState.SUCCEEDED)
    assert ends.checkpoints[-1].cursor == stopped_at + 1


def test_checkpoints_come_every_checkpoint_seconds_too(app: App) -> None:
    ends = Ends()
    app.add_middleware(ends)

    @app.iterative_job(name="timed", tenant="t", checkpoint_items=10**9, checkpoint_seconds=0.01)
    def timed(cursor: int | None, t: str) -> Iterator[int]:
        item = 0
        while not ends.checkpoints:  # only the interval can bring a checkpoint
            item += 1
            yield item

    job_id = timed.enqueue("a")
    with Worker(app, concurrency=1).in_thread():
        wait_state(app, job_id, JobState.SUCCEEDED)
    first = ends.checkpoints[0]
    assert first.slices == 0 and 0 < first.items < 10**9


def test_a_cursor_that_is_not_json_fails_the_attempt_and_keeps_the_last_good_one(
    app: App,
) -> None:
    @app.iterative_job(name="bad", tenant="tenant", checkpoint_items=1, max_attempts=1)
    def bad(cursor: object, tenant: str) -> Iterator[object]:
        yield 1
        yield {"after": 2}
        yield {"after": object()}

    job_id = bad.enqueue("a")
    with Worker(app, concurrency=1).in_thread():
        info = wait_state(app, job_id, JobState.DEAD)
    error = info.last_error or ""
    assert error.startswith("CursorError: iterative job 'bad'")
    assert f"(id {job_id})" in error
    assert "of type dict that is not JSON" in error
    assert "last good cursor ({'after': 2}) stays stored" in error
    assert info.progress == Progress(cursor={"after": 2}, items=2)


def test_an_iteration_whose_lease_is_lost_stops_and_stores_nothing(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """A run that goes on past its lease (a worker cut off from its store) stops at its next
    cursor: the job may already run elsewhere."""
    gone = threading.Event()
    after: list[int] = []
    ends = Ends()
    app.add_middleware(ends)

    @app.iterative_job(name="outlived", tenant="tenant", checkpoint_items=1, max_attempts=1)
    def outlived(cursor: int | None, tenant: str) -> Iterator[int]:
        if cursor is not None:
            return  # the run after: done at once
        yield 1
        gone.wait(30)
        after.append(2)
        yield 2
        after.append(3)  # never reached: the run stops at the cursor after its lease went
        yield 3

    job_id = outlived.enqueue("a")
    with Worker(app, concurrency=1).in_thread():
        wait_for(lambda: job(app, job_id).progress is not None, "the first checkpoint")
        # Hand it back behind the worker's back, as an expiry would: its lease is not held.
        app.backend.release(ReleaseParams(token=f"{job_id}:1", now=app.clock()))
        gone.set()
        wait_for(lambda: "yielded after its lease was lost" in caplog.text, "the stop's log line")
    assert after == [2]
    assert job_id in caplog.text and "outlived" in caplog.text
    assert ends.checkpoints == [Progress(cursor=1, items=1)]  # cursor 2 was not stored


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"slice": 0}, "slice must be"),
        ({"slice": "30"}, "slice must be a number of seconds"),
        ({"checkpoint_items": 0}, "checkpoint_items of iterative job 'j' must be a whole number"),
        ({"checkpoint_items": True}, "checkpoint_items"),
        ({"checkpoint_seconds": -1}, "checkpoint_seconds must be"),
    ],
)
def test_bad_settings_are_refused_at_declaration(
    app: App, settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):

        @app.iterative_job(name="j", **settings)  # type: ignore[arg-type]
        def j(cursor: int | None) -> Iterator[int]:
            yield 1

    assert "j" not in app.jobs


def test_a_function_that_cannot_iterate_is_refused_at_declaration(app: App) -> None:
    with pytest.raises(ConfigError, match=r"must be a generator function .* use @app\.job"):

        @app.iterative_job(name="plain")  # type: ignore[arg-type]
        def plain(cursor: int | None) -> int:
            return 1

    with pytest.raises(ConfigError, match="must take the cursor as its first parameter"):

        @app.iterative_job(name="no_cursor")
        def no_cursor(*, tenant: str) -> Iterator[int]:  # type: ignore[misc]
            yield 1

    assert not app.jobs


def test_a_generator_declared_as_a_plain_job_is_refused(app: App) -> None:
    with pytest.raises(ConfigError, match=r"declare it with @app\.iterative_job"):

        @app.job(name="gen", tenant="t")
        def gen(t: str) -> Iterator[int]:
            yield 1

    assert not app.jobs


def test_enqueue_takes_the_arguments_after_the_cursor(app: App) -> None:
    @app.iterative_job(name="export", tenant="account")
    def export(cursor: str | None, account: str, since: int = 0) -> Iterator[str]:
        yield "x"

    job_id = export.enqueue("acme", since=3)
    info = job(app, job_id)
    assert (info.tenant, info.payload) == ("acme", '{"args":["acme"],"kwargs":{"since":3}}')
    assert export("acme") == "x"  # a local call runs every item from the start
