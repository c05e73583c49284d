"""The worker in a thread of the test process, on the in-memory reference model."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairq import App, ConfigError, JobInfo, JobState
from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    DequeueParams,
    DequeueResult,
    EnqueueParams,
    FailParams,
    GetJobsParams,
    MaintainParams,
    WaitParams,
    waited_first,
)
from fairq.job import NewJob, encode_payload
from fairq.model import ReferenceModel
from fairq.worker import Worker

from .apps import make_app
from .helpers import go, job, marks, new_job, wait_for, wait_state


@pytest.fixture
def app() -> Iterator[App]:
    app = make_app("memory://")
    yield app
    app.close()


def test_def_and_async_jobs_run_and_are_acked(app: App, tmp_path: Path) -> None:
    ids = [
        app.jobs["record"].enqueue("t1", str(tmp_path), "sync"),
        app.jobs["record_async"].enqueue("t2", str(tmp_path), "async"),
    ]
    with Worker(app, concurrency=2).in_thread():
        for job_id in ids:
            wait_state(app, job_id, JobState.SUCCEEDED)
    assert set(marks(tmp_path, "done")) == {"sync", "async"}


def test_async_jobs_taken_together_are_cancelled_when_handed_back(app: App, tmp_path: Path) -> None:
    tags = ["a", "b", "c"]
    ids = [app.jobs["block_async"].enqueue(f"t{tag}", str(tmp_path), tag) for tag in tags]
    worker = Worker(app, concurrency=3, grace_period=0.0)
    with worker.in_thread():
        wait_for(lambda: set(marks(tmp_path, "started")) == set(tags), "all three to start")
        worker.stop()
    wait_for(lambda: set(marks(tmp_path, "cancelled")) == set(tags), "all three cancelled")
    for job_id in ids:
        info = job(app, job_id)
        assert (info.state, info.attempts) == (JobState.READY, 0)
    assert marks(tmp_path, "done") == {}


def test_async_successes_are_acked_while_an_async_failure_is_being_stored() -> None:
    """An ``async def`` job's success goes into the ack buffer from the event loop; only
    failures wait for the thread that stores them, so a slow ``fail`` holds no success back."""

    class SlowFail(ReferenceModel):
        failing = threading.Event()
        release = threading.Event()

        def fail(self, params: FailParams) -> JobInfo:
            self.failing.set()
            self.release.wait(60)
            return super().fail(params)

    store = SlowFail()
    app = App(backend=store)

    @app.job(name="fails", tenant="tenant", max_attempts=1)
    async def fails(tenant: str) -> None:
        raise ValueError("no disk")

    @app.job(name="quick", tenant="tenant")
    async def quick(tenant: str) -> None:
        pass

    failed = fails.enqueue("t0")
    with Worker(app, concurrency=2).in_thread():
        assert store.failing.wait(60)
        try:
            for job_id in [quick.enqueue(f"t{n}") for n in range(1, 6)]:
                wait_state(app, job_id, JobState.SUCCEEDED)
        finally:
            store.release.set()
        wait_state(app, failed, JobState.DEAD)


def test_failing_job_is_retried_then_dead(app: App) -> None:
    job_id = app.jobs["explode"].enqueue("t1", "no disk")
    with Worker(app).in_thread():
        info = wait_state(app, job_id, JobState.DEAD)
    assert info.attempts == 2
    assert info.last_error is not None
    assert info.last_error.startswith("ValueError: no disk")
    assert "Traceback" in info.last_error


def test_a_job_the_app_does_not_declare_is_dead_after_the_unknown_job_timeout(app: App) -> None:
    producer = App(backend=app.backend)
    producer.job(name="elsewhere", tenant="tenant")(lambda tenant: None)
    job_id = producer.jobs["elsewhere"].enqueue("t1")
    worker = Worker(app, queues="default", app_name="tests:app", unknown_job_timeout=0.0)
    with worker.in_thread():
        info = wait_state(app, job_id, JobState.DEAD)
    assert info.attempts == 1
    assert "no worker here knows job 'elsewhere'" in (info.last_error or "")
    assert "tests:app" in (info.last_error or "")
    assert "unknown_job_timeout (0 s)" in (info.last_error or "")


def test_concurrency_runs_n_jobs_at_once_def_and_async_together(app: App, tmp_path: Path) -> None:
    ids = [app.jobs["rendezvous"].enqueue("t", str(tmp_path), f"s{i}", 4) for i in range(2)]
    ids += [app.jobs["rendezvous_async"].enqueue("t", str(tmp_path), f"a{i}", 4) for i in range(2)]
    with Worker(app, concurrency=4).in_thread():
        for job_id in ids:
            wait_state(app, job_id, JobState.SUCCEEDED)


def test_strict_queue_order(app: App, tmp_path: Path) -> None:
    append = app.jobs["append"]
    for i in range(3):
        append.options(queue="low").enqueue("t", str(tmp_path), f"low{i}")
        append.options(queue="high").enqueue("t", str(tmp_path), f"high{i}")
    Worker(app, queues="high,low", concurrency=1, burst=True).run()  # returns when all are done
    order = (tmp_path / "order.txt").read_text().split()
    assert order == ["high0", "high1", "high2", "low0", "low1", "low2"]


def test_stopping_waits_for_the_cleanup_of_an_async_job_it_hands_back(app: App) -> None:
    """The event loop's thread is a daemon: the worker waits for a cancelled job's cleanup
    (which needs the loop) before it returns, so the process does not end mid-cleanup."""
    started = threading.Event()
    cleaned: list[str] = []

    @app.job(name="slow_cleanup", tenant="tenant")
    async def slow_cleanup(tenant: str) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.3)
            cleaned.append(tenant)

    job_id = slow_cleanup.enqueue("t1")
    with Worker(app, grace_period=0.0).in_thread():
        assert started.wait(60)
    assert cleaned == ["t1"]
    assert job(app, job_id).state is JobState.READY


def test_stop_lets_a_short_job_finish_and_hands_a_long_one_back(app: App, tmp_path: Path) -> None:
    block = app.jobs["block"]
    short = block.enqueue("t1", str(tmp_path), "short")
    long = app.jobs["block_async"].enqueue("t2", str(tmp_path), "long")
    worker = Worker(app, concurrency=2, grace_period=2.0)
    with worker.in_thread():
        wait_for(lambda: {"short", "long"} <= set(marks(tmp_path, "started")), "both to start")
        worker.stop()
        third = app.jobs["record"].enqueue("t3", str(tmp_path), "third")
        go(tmp_path, "short")
    assert job(app, short).state is JobState.SUCCEEDED
    handed_back = job(app, long)
    assert handed_back.state is JobState.READY
    assert handed_back.attempts == 0
    assert job(app, third).state is JobState.READY


def test_second_stop_hands_back_at_once(app: App, tmp_path: Path) -> None:
    job_id = app.jobs["block"].enqueue("t1", str(tmp_path), "long")
    worker = Worker(app, grace_period=600.0)
    with worker.in_thread():
        wait_for(lambda: "long" in marks(tmp_path, "started"), "the job to start")
        worker.stop()
        worker.stop(hand_back_now=True)
    assert job(app, job_id).state is JobState.READY
    go(tmp_path, "long")  # let the abandoned thread end


def test_job_end_is_logged_with_structured_fields(
    app: App, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = "ü" * 300
    job_id = app.jobs["record"].enqueue(tenant, str(tmp_path), "x")
    with caplog.at_level(logging.DEBUG, logger="fairq.worker"), Worker(app).in_thread():
        wait_state(app, job_id, JobState.SUCCEEDED)
        ends = wait_for(
            lambda: [r for r in caplog.records if getattr(r, "action", None) == "job_end"],
            "the job end record",
        )
    (record,) = ends
    fields = record.__dict__
    assert fields["job_id"] == job_id
    assert fields["queue"] == "default"
    assert fields["attempt"] == 1
    assert fields["outcome"] == "succeeded"
    assert len(fields["tenant"]) <= 100
    assert fields["duration_ms"] >= 0
    assert job_id in record.getMessage()


def test_heartbeats_keep_a_long_job_leased(app: App, tmp_path: Path) -> None:
    job_id = app.jobs["block_short_lease"].enqueue("t1", str(tmp_path), "long")
    with Worker(app).in_thread():
        first = wait_for(lambda: job(app, job_id).deadline or 0.0, "the job to start")
        wait_for(lambda: (job(app, job_id).deadline or 0.0) > first, "a heartbeat")
        app.backend.maintain(MaintainParams(now=app.clock()))  # nothing has lapsed
        go(tmp_path, "long")
        info = wait_state(app, job_id, JobState.SUCCEEDED)
    assert info.attempts == 1


def test_a_lost_lease_is_logged_and_the_worker_goes_on(
    app: App, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = app.jobs["block_short_lease"].enqueue("t1", str(tmp_path), "slow")
    with caplog.at_level(logging.DEBUG, logger="fairq.worker"):
        with Worker(app, heartbeat_interval=3600.0).in_thread():
            wait_for(lambda: "slow" in marks(tmp_path, "started"), "the job to start")
            lapsed = app.clock() + 10.0  # as if the worker had stalled past the lease
            assert len(app.backend.maintain(MaintainParams(now=lapsed)).expired) == 1
            go(tmp_path, "slow")  # the first run ends; its ack is refused; the job runs again
            info = wait_state(app, job_id, JobState.SUCCEEDED)
        outcomes = [getattr(r, "outcome", None) for r in caplog.records]
    assert info.attempts == 2
    assert outcomes.count("lease_lost") == 1
    assert outcomes.count("succeeded") == 1


def test_undecodable_payload_and_arguments_that_do_not_fit_are_dead_at_once(app: App) -> None:
    now = app.clock()
    broken = {"not json": "{oops", "wrong arguments": '{"args":[1,2,3,4,5],"kwargs":{}}'}
    jobs = [_record_job(payload, now) for payload in broken.values()]
    app.backend.enqueue(EnqueueParams(jobs=jobs, now=now))
    with Worker(app).in_thread():
        bad_json, bad_args = (wait_state(app, j.id, JobState.DEAD) for j in jobs)
    assert bad_json.attempts == 1
    assert "cannot be decoded" in (bad_json.last_error or "")
    assert bad_args.attempts == 1
    assert "do not fit job record(tenant" in (bad_args.last_error or "")


def test_arguments_are_checked_by_their_names_not_only_their_count(
    app: App, tmp_path: Path
) -> None:
    """The fit of arguments is remembered per shape: a keyword with a wrong name is not taken
    for the right one seen before."""
    now = app.clock()
    wd = str(tmp_path)
    payloads = [
        encode_payload(["t1", wd], {"tag": "a"}),
        encode_payload(["t1", wd], {"tag": "b"}),
        encode_payload(["t1", wd], {"tog": "c"}),
    ]
    jobs = [_record_job(payload, now) for payload in payloads]
    app.backend.enqueue(EnqueueParams(jobs=jobs, now=now))
    with Worker(app, concurrency=1).in_thread():
        wait_state(app, jobs[0].id, JobState.SUCCEEDED)
        wait_state(app, jobs[1].id, JobState.SUCCEEDED)
        wrong = wait_state(app, jobs[2].id, JobState.DEAD)
    assert set(marks(tmp_path, "done")) == {"a", "b"}
    assert "do not fit job record(tenant" in (wrong.last_error or "")


def _record_job(payload: str, now: float) -> NewJob:
    return new_job(uuid.uuid4().hex, name="record", payload=payload, run_at=now, lease_timeout=60.0)


def test_start_is_logged_without_the_store_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app("memory://")
    secret_app = App("redis://user:s3cret@example:6379/0", backend=app.backend)
    secret_app.jobs = app.jobs
    with caplog.at_level(logging.INFO, logger="fairq.worker"), Worker(secret_app).in_thread():
        pass
    started = [r.getMessage() for r in caplog.records if getattr(r, "action", "") == "worker_start"]
    assert len(started) == 1
    assert "redis://user:***@example:6379/0" in started[0]
    assert "s3cret" not in caplog.text
    assert "queues default" in started[0]


def test_default_queues_are_those_the_jobs_declare(app: App) -> None:
    app.job(name="reports_job", queue="reports", tenant="tenant")(lambda tenant: None)
    assert sorted(Worker(app).order.queues) == ["default", "reports"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"grace_period": -1}, "grace_period"),
        ({"heartbeat_interval": 0}, "heartbeat_interval"),
        ({"unknown_job_timeout": -1}, "unknown_job_timeout"),
        ({"unknown_job_timeout": -1}, "unknown_job_timeout"),
        ({"queues": "a,,b"}, "empty queue name"),
    ],
)
def test_bad_settings_are_refused_clearly(app: App, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Worker(app, **options)


def test_an_app_without_jobs_needs_queues() -> None:
    with pytest.raises(ConfigError, match="declares no jobs"):
        Worker(App("memory://"))


def test_a_job_taken_by_a_wait_that_ends_after_stop_is_handed_back(app: App) -> None:
    """The fetch loop waits outside its gate, so stop() does not wait for the wait; what that
    wait takes once the worker is stopping goes back to the queue, not to a lease nobody
    holds."""
    store = app.backend
    waiting, taken = threading.Event(), []
    store_wait, store_dequeue = store.wait, store.dequeue

    def wait(params: WaitParams) -> None:  # the real wait, observed
        waiting.set()
        store_wait(params)

    def dequeue(params: DequeueParams) -> DequeueResult:
        result = store_dequeue(params)
        taken.extend(lease.job_id for lease in result.leases)
        return result

    store.wait, store.dequeue = wait, dequeue  # type: ignore[method-assign]
    with Worker(app, poll_interval=60.0).in_thread():
        assert waiting.wait(60)  # the worker is idle: its fetch loop is in a waiting dequeue
    fetchers = [t for t in threading.enumerate() if t.name == "fairq-fetch"]
    job_id = app.jobs["record"].enqueue("t1", "/nonexistent", "late")
    for thread in fetchers:
        thread.join(10)
        assert not thread.is_alive()
    assert taken == [job_id]  # the wait under way at stop took it …
    [info] = app.backend.get_jobs(GetJobsParams(ids=[job_id]))
    assert (info.state, info.attempts) == (JobState.READY, 0)  # … and handed it back


@pytest.mark.timeout(60)  # a lost signal leaves run() blocked: this fails the test instead
def test_a_stop_signal_delivered_to_another_thread_stops_the_worker(app: App) -> None:
    """The kernel may hand a process's SIGTERM to any of its threads; the main thread, blocked
    waiting for signals, must hear of it all the same."""
    ours = signal.getsignal(signal.SIGTERM)

    main = threading.main_thread().native_id

    def main_is_reading_the_signal_pipe() -> bool:
        with open(f"/proc/self/task/{main}/wchan") as wchan:  # the kernel function it sleeps in
            return wchan.read().endswith(("pipe_read", "pipe_wait"))

    def terminate_from_this_thread() -> None:
        while signal.getsignal(signal.SIGTERM) is ours or not main_is_reading_the_signal_pipe():
            time.sleep(0.01)  # until the worker has its handler and the main thread blocks
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    threading.Thread(target=terminate_from_this_thread, daemon=True).start()
    Worker(app, poll_interval=60.0).run()  # returns only once the signal stopped it
    assert signal.getsignal(signal.SIGTERM) is ours


def test_a_busy_worker_acks_and_refills_in_one_call() -> None:
    class Counting(ReferenceModel):
        acks_with_dequeue = 0

        def ack_and_dequeue(self, params: AckAndDequeueParams) -> AckAndDequeueResult:
            if params.acks.tokens:
                self.acks_with_dequeue += 1
            return super().ack_and_dequeue(params)

    store = Counting()
    app = App(backend=store)
    app.job(name="quick", tenant="tenant")(lambda tenant: None)
    ids = [app.jobs["quick"].enqueue(f"t{n % 3}") for n in range(60)]
    with Worker(app, concurrency=2).in_thread():
        for job_id in ids:
            wait_state(app, job_id, JobState.SUCCEEDED)
    assert store.acks_with_dequeue > 0


def test_a_job_handed_back_at_stop_is_not_left_to_a_wait_still_under_way() -> None:
    """The idle wait running beside the job wakes when the job is handed back, and takes
    it; shutdown lets that wait hand it back again before the worker is done. (A worker
    process that ended first would leave the job leased to nobody until its lease ran out.)"""

    class SlowAfterWaking(ReferenceModel):
        waiting = threading.Event()
        last_taken = 0.0  # monotonic time the last dequeue that took a job returned

        def wait(self, params: WaitParams) -> None:
            self.waiting.set()
            super().wait(params)

        def dequeue(self, params: DequeueParams) -> DequeueResult:
            if params.wait > 0:
                params = waited_first(params, self.wait)
                # Paused until the worker has finished, if it finishes without this dequeue;
                # a worker that waits for it (as it must) is let go after PAUSE.
                worker_done.wait(PAUSE)
            result = super().dequeue(params)
            if result.leases:
                self.last_taken = time.monotonic()
            return result

    PAUSE = 2.0  # only the correct worker waits this out; it can never make the test pass
    worker_done = threading.Event()
    store = SlowAfterWaking()
    app = App(backend=store)
    started, release = threading.Event(), threading.Event()

    @app.job(name="hold", tenant="tenant")
    def hold(tenant: str) -> None:
        started.set()
        release.wait(60)

    job_id = hold.enqueue("t1")
    worker = Worker(app, concurrency=2, grace_period=600.0)
    try:
        with worker.in_thread():
            assert started.wait(60) and store.waiting.wait(60)
            worker.stop()
            worker.stop(hand_back_now=True)
        done = time.monotonic()
        worker_done.set()  # a dequeue the worker did not wait for goes on now …
        for thread in [t for t in threading.enumerate() if t.name == "fairq-fetch"]:
            thread.join(60)  # … and has taken the job when its thread ends
            assert not thread.is_alive()
        assert store.last_taken < done
        info = job(app, job_id)
        assert (info.state, info.attempts) == (JobState.READY, 0)
    finally:
        release.set()


def test_an_ack_is_stored_while_the_fetch_loop_waits_for_new_work() -> None:
    """The fetch loop stores every ack; waiting for new work (here a minute), it still stores
    one that falls due, alone, without waiting for the wait to end."""

    class Observed(ReferenceModel):
        waiting = threading.Event()

        def wait(self, params: WaitParams) -> None:
            self.waiting.set()
            super().wait(params)

    store = Observed()
    app = App(backend=store)

    @app.job(name="after_the_wait_began", tenant="tenant")
    def after_the_wait_began(tenant: str) -> None:
        assert store.waiting.wait(60)

    job_id = after_the_wait_began.enqueue("t1")
    with Worker(app, concurrency=2, poll_interval=60.0).in_thread():
        info = wait_state(app, job_id, JobState.SUCCEEDED)
    assert info.attempts == 1


def test_a_worker_at_rest_runs_only_its_own_threads() -> None:
    """The thread map of ``fairq.worker.worker``: no thread of its own for acks."""
    app = App(backend=ReferenceModel())
    ran = threading.Event()
    app.job(name="once", tenant="tenant")(lambda tenant: ran.set())
    job_id = app.jobs["once"].enqueue("t1")
    before = set(threading.enumerate())
    with Worker(app, poll_interval=60.0).in_thread():
        wait_state(app, job_id, JobState.SUCCEEDED)
        names = {t.name.rstrip("-0123456789") for t in set(threading.enumerate()) - before}
    assert ran.is_set()
    assert names == {
        "fairq-worker-main",  # in_thread's; run() in the main thread needs none
        "fairq-worker",
        "fairq-fetch",
        "fairq-job",  # one waits for new work
        "fairq-heartbeat",
        "fairq-cancels",  # a look at the running jobs' cancel requests, once a second
        "fairq-maintain",
    }
