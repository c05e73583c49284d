"""The instrumentation seam: every hook is called, in order, on the right thread, by a real
worker on a real SQLite store and by the relay's peer side; a hook that raises breaks nothing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from fairq import App, CancelOutcome, ConfigError, JobState
from fairq.contract import Backend, DequeueParams, ExpiredLease
from fairq.instrument import JobEnd, Middleware, Outcome, StoreCall
from fairq.instrument.timing import TimedBackend
from fairq.job import Lease, NewJob
from fairq.relay import RelayedRuns, ticket_of
from fairq.worker import Worker
from tests.worker.apps import make_app
from tests.worker.helpers import wait_for, wait_state


class Recorder(Middleware):
    """Writes down every hook call: (hook, job id, detail), and the thread of each run hook."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []
        self.threads: dict[tuple[str, str], int] = {}
        self.ops: list[str] = []
        self._lock = threading.Lock()

    def _note(self, hook: str, job_id: str, detail: object = None) -> None:
        with self._lock:
            self.calls.append((hook, job_id, detail))

    def of(self, hook: str, job_id: str | None = None) -> list[object]:
        with self._lock:
            return [d for h, j, d in self.calls if h == hook and job_id in (None, j)]

    def order(self, job_id: str) -> list[str]:
        with self._lock:
            return [h for h, j, _ in self.calls if j == job_id]

    def before_enqueue(self, jobs: Sequence[NewJob]) -> Sequence[NewJob]:
        for job in jobs:
            self._note("before_enqueue", job.id)
        return [replace(job, headers={**job.headers, "seen": "yes"}) for job in jobs]

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        for job, queue in zip(jobs, queues or [None] * len(jobs), strict=True):
            self._note("after_enqueue", job.id, (queue, error))

    def after_dequeue(self, leases: Sequence[Lease]) -> None:
        for lease in leases:
            self._note("after_dequeue", lease.job_id, lease.attempt)

    def before_run(self, lease: Lease) -> None:
        self.threads[("before_run", f"{lease.job_id}/{lease.attempt}")] = threading.get_ident()
        self._note("before_run", lease.job_id, lease.headers.get("seen"))

    def after_run(self, lease: Lease, error: BaseException | None, seconds: float) -> None:
        self.threads[("after_run", f"{lease.job_id}/{lease.attempt}")] = threading.get_ident()
        self._note("after_run", lease.job_id, None if error is None else str(error))

    def after_job(self, lease: Lease, end: JobEnd) -> None:
        self._note("after_job", lease.job_id, end.outcome)

    def after_retry(self, lease: Lease, end: JobEnd) -> None:
        self._note("after_retry", lease.job_id, end.error)

    def after_dead(self, lease: Lease, end: JobEnd) -> None:
        self._note("after_dead", lease.job_id, end.error)

    def after_cancelled(self, lease: Lease, end: JobEnd) -> None:
        self._note("after_cancelled", lease.job_id, end.error)

    def store_call(self, call: StoreCall) -> None:
        with self._lock:
            self.ops.append(call.op)


class Raising(Middleware):
    """Every hook raises."""

    def before_enqueue(self, jobs: Sequence[NewJob]) -> Sequence[NewJob]:
        raise RuntimeError("before_enqueue broke")

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        raise RuntimeError("after_enqueue broke")

    def after_dequeue(self, leases: Sequence[Lease]) -> None:
        raise RuntimeError("after_dequeue broke")

    def before_run(self, lease: Lease) -> None:
        raise RuntimeError("before_run broke")

    def after_run(self, lease: Lease, error: BaseException | None, seconds: float) -> None:
        raise RuntimeError("after_run broke")

    def after_job(self, lease: Lease, end: JobEnd) -> None:
        raise RuntimeError("after_job broke")

    def lease_expired(self, expired: ExpiredLease) -> None:
        raise RuntimeError("lease_expired broke")

    def store_call(self, call: StoreCall) -> None:
        raise RuntimeError("store_call broke")


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    made = make_app(f"sqlite:///{tmp_path / 'q.db'}")
    yield made
    made.close()


def test_a_worker_calls_every_hook_in_order_on_the_jobs_thread(app: App, tmp_path: Path) -> None:
    recorder = Recorder()
    app.add_middleware(recorder)
    ok = app.jobs["record"].enqueue("t1", str(tmp_path), "ok")
    bad = app.jobs["explode"].enqueue("t2", "disk full")  # 2 attempts: retried, then dead
    with Worker(app, concurrency=2).in_thread():
        wait_state(app, ok, JobState.SUCCEEDED)
        wait_state(app, bad, JobState.DEAD)
        wait_for(lambda: recorder.of("after_dead", bad), "the dead job's hook")

    for job_id in (ok, bad):
        assert recorder.of("after_enqueue", job_id) == [("default", None)]
    assert recorder.order(ok) == [
        "before_enqueue", "after_enqueue", "after_dequeue", "before_run", "after_run", "after_job",
    ]  # fmt: skip
    assert recorder.order(bad) == [
        "before_enqueue", "after_enqueue",
        "after_dequeue", "before_run", "after_run", "after_job", "after_retry",
        "after_dequeue", "before_run", "after_run", "after_job", "after_dead",
    ]  # fmt: skip
    assert recorder.of("after_job", ok) == [Outcome.SUCCEEDED]
    assert recorder.of("after_job", bad) == [Outcome.RETRYING, Outcome.DEAD]
    assert recorder.of("after_run", bad) == ["disk full", "disk full"]
    assert recorder.of("after_dequeue", bad) == [1, 2]
    (dead_error,) = recorder.of("after_dead", bad)
    assert str(dead_error).startswith("ValueError: disk full")
    # the headers added at enqueue travel with the job to its run
    assert recorder.of("before_run") == ["yes", "yes", "yes"]
    # before_run and after_run on the job's own thread, not the test's
    for key in ("ok", "bad1", "bad2"):
        job_id, attempt = {"ok": (ok, 1), "bad1": (bad, 1), "bad2": (bad, 2)}[key]
        run = f"{job_id}/{attempt}"
        thread = recorder.threads[("before_run", run)]
        assert thread == recorder.threads[("after_run", run)]
        assert thread != threading.get_ident()
    # every store call is timed: the enqueues, the dequeues, the failures, the ack
    assert {"enqueue", "fail"} <= set(recorder.ops)
    assert {"ack_many", "ack_and_dequeue"} & set(recorder.ops)
    assert {"dequeue", "dequeue_wait", "ack_and_dequeue"} & set(recorder.ops)


def test_a_job_stopped_on_a_cancel_request_ends_with_after_cancelled(
    app: App, tmp_path: Path
) -> None:
    recorder = Recorder()
    app.add_middleware(recorder)
    job_id = app.jobs["until_cancelled"].enqueue("t1", str(tmp_path), "c")
    with Worker(app, concurrency=1).in_thread():
        wait_for(lambda: recorder.of("before_run", job_id), "the job to start")
        assert app.cancel(job_id) is CancelOutcome.REQUESTED
        wait_for(lambda: recorder.of("after_cancelled", job_id), "the cancelled job's hook")
    assert recorder.of("after_job", job_id) == [Outcome.CANCELLED]
    (error,) = recorder.of("after_cancelled", job_id)
    assert str(error).startswith("cancelled on request (JobCancelled: job 'until_cancelled'")
    assert app.job_info(job_id).state is JobState.CANCELLED  # type: ignore[union-attr]


def test_a_hook_that_raises_is_logged_once_and_breaks_nothing(
    app: App, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app.add_middleware(Raising())
    recorder = Recorder()
    app.add_middleware(recorder)  # after the raising one: still called
    with caplog.at_level(logging.ERROR, logger="fairq.instrument"):
        ids = [app.jobs["record"].enqueue(f"t{i}", str(tmp_path), f"j{i}") for i in range(3)]
        with Worker(app, concurrency=1).in_thread():
            for job_id in ids:
                wait_state(app, job_id, JobState.SUCCEEDED)
            wait_for(lambda: len(recorder.of("after_job")) == 3, "the hooks after the ends")
    failed = [r for r in caplog.records if getattr(r, "action", None) == "hook_failed"]
    labels = [r.__dict__["hook"] for r in failed]
    assert len(labels) == len(set(labels)), labels  # once per hook, not per job
    for hook in ("before_enqueue", "after_enqueue", "after_dequeue", "before_run", "after_run",
                 "after_job", "store_call"):  # fmt: skip
        assert f"Raising.{hook}" in labels
    assert app.hooks.failures["Raising.before_run"] == 3
    assert app.hooks.failures["Raising.after_job"] == 3
    assert all(r.exc_info is not None for r in failed)  # with the traceback
    # the hook raising first did not keep the job's own headers from the next plug-in
    assert recorder.of("before_run") == ["yes", "yes", "yes"]


def test_a_before_enqueue_that_returns_other_jobs_is_ignored(
    app: App, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Dropping(Middleware):
        def before_enqueue(self, jobs: Sequence[NewJob]) -> Sequence[NewJob]:
            return []  # would lose the jobs

    app.add_middleware(Dropping())
    with caplog.at_level(logging.ERROR, logger="fairq.instrument"):
        job_id = app.jobs["record"].enqueue("t1", str(tmp_path), "x")
    info = app.job_info(job_id)
    assert info is not None and info.state is JobState.READY
    (record,) = [r for r in caplog.records if getattr(r, "action", None) == "hook_failed"]
    assert "before_enqueue must return None or the same jobs" in record.getMessage()


def test_the_relay_peer_side_reports_relayed_jobs_like_native_ones(app: App) -> None:
    recorder = Recorder()
    app.add_middleware(recorder)
    ok = app.jobs["record"].enqueue("t1", "/nonexistent", "x")
    bad = app.jobs["explode"].enqueue("t1", "boom")
    taken = app.backend.dequeue(
        DequeueParams(queues=["default"], worker_id="relay", now=app.clock(), limit=2, hold=10.0)
    ).leases  # as the relay does, held unclaimed until it publishes each job with its lease
    runs = RelayedRuns(app)
    try:
        for lease in taken:
            run = runs.begin(ticket_of(lease))
            assert run is not None
            if lease.job_id == ok:
                run.succeeded()
            else:
                run.failed(ValueError("boom"))
    finally:
        runs.close()
    assert recorder.order(ok)[2:] == ["after_dequeue", "before_run", "after_run", "after_job"]
    assert recorder.of("after_job", ok) == [Outcome.SUCCEEDED]
    assert recorder.order(bad)[2:] == [
        "after_dequeue", "before_run", "after_run", "after_job", "after_retry",
    ]  # fmt: skip
    assert recorder.of("after_run", bad) == ["boom"]
    assert recorder.of("before_run") == ["yes", "yes"]
    assert {"heartbeat", "ack_many", "fail"} <= set(recorder.ops)


def test_store_calls_are_timed_only_when_a_plug_in_wants_them(app: App) -> None:
    """The default App (the job log alone) calls its store directly: nothing added per call."""
    assert app.timed_backend is app.backend
    app.add_middleware(Middleware())  # overrides nothing
    assert app.timed_backend is app.backend
    app.add_middleware(Recorder())
    assert isinstance(app.timed_backend, TimedBackend)
    assert app.timed_backend.inner is app.backend


def test_what_cannot_be_a_plug_in_is_refused_at_registration(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with pytest.raises(ConfigError, match=r"pass Recorder\(\)"):
        App(url, middleware=[Recorder])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="none of the hooks"):
        App(url, middleware=[object()])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="must be a list"):
        App(url, middleware=Recorder())  # type: ignore[arg-type]
    app = App(url, middleware=[Recorder()])
    assert [type(m).__name__ for m in app.middleware] == ["JobLog", "Recorder"]

    class Checkpoints:  # duck-typed, with one hook only: every Middleware hook counts
        def after_checkpoint(self, lease: object, progress: object) -> None:
            pass

    app.add_middleware(Checkpoints())  # type: ignore[arg-type]


def test_a_hook_failing_on_every_call_is_logged_once_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App("memory://", middleware=[Raising()])
    expired = ExpiredLease(
        job_id="j", name="n", queue="q", tenant="t", attempt=1, deadline=0.0, dead=False
    )
    with caplog.at_level(logging.ERROR, logger="fairq.instrument"):
        for _ in range(100):
            app.hooks.lease_expired(expired)
    assert app.hooks.failures["Raising.lease_expired"] == 100
    (record,) = caplog.records
    assert "Raising.lease_expired raised RuntimeError: lease_expired broke" in record.getMessage()


def test_the_timing_wrapper_has_every_operation_of_the_backend_contract(app: App) -> None:
    """A store operation added to the contract must be added to TimedBackend too."""
    operations = {
        name
        for name, member in vars(Backend).items()
        if callable(member) and not name.startswith("_")
    }
    missing = {name for name in operations if name not in vars(TimedBackend)}
    assert not missing, f"TimedBackend lacks {sorted(missing)}"
    assert isinstance(TimedBackend(app.backend, app.hooks), Backend)
