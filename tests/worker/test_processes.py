"""``fairq worker`` as real processes on a real SQLite file: jobs, signals, ``--processes``."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from fairq import App, JobState
from fairq.worker import Worker

from .apps import make_app
from .conftest import Store
from .helpers import go, job, marks, wait_for, wait_state

pytestmark = pytest.mark.processes


def test_def_and_async_jobs_run_and_are_acked(store: Store) -> None:
    wd = str(store.workdir)
    ids = [
        store.app.jobs["record"].enqueue("t1", wd, "sync"),
        store.app.jobs["record_async"].enqueue("t2", wd, "async"),
    ]
    worker = store.worker("--burst", log_level="debug")
    assert worker.exit_code() == 0
    for job_id in ids:
        assert job(store.app, job_id).state is JobState.SUCCEEDED
    assert set(marks(store.workdir, "done")) == {"sync", "async"}
    assert worker.log().count("outcome=succeeded") == 2


def test_successes_are_not_logged_at_the_default_level(store: Store) -> None:
    """One line per succeeded job is DEBUG: at INFO it would be most of a short job's cost."""
    store.app.jobs["record"].enqueue("t1", str(store.workdir), "sync")
    worker = store.worker("--burst")
    assert worker.exit_code() == 0
    assert "started" in worker.log()
    assert "outcome=succeeded" not in worker.log()


@pytest.mark.parametrize("name", ["explode", "explode_async"])
def test_failing_job_is_retried_then_dead(store: Store, name: str) -> None:
    job_id = store.app.jobs[name].enqueue("t1", "disk full")
    worker = store.worker("--burst")
    assert worker.exit_code() == 0
    info = job(store.app, job_id)
    assert info.state is JobState.DEAD
    assert info.attempts == 2
    assert (info.last_error or "").startswith("ValueError: disk full")
    log = worker.log()
    assert "outcome=retrying" in log
    assert "outcome=dead" in log
    assert "Traceback" in log


def _elsewhere(url: str, ran: threading.Event) -> App:
    """Another app on the same store and queue, declaring a job ``tests.worker.apps`` does not."""
    other = App(url)
    other.job(name="only_elsewhere", tenant="tenant")(lambda tenant: ran.set())
    return other


def test_a_job_this_app_does_not_declare_waits_for_a_worker_that_does(store: Store) -> None:
    ran = threading.Event()
    other = _elsewhere(store.url, ran)
    job_id = other.jobs["only_elsewhere"].enqueue("t1")
    old = store.worker()  # its app does not declare the job
    old.wait_log("no worker here knows job 'only_elsewhere'")
    old.signal(signal.SIGTERM)
    assert old.exit_code() == 0
    info = job(store.app, job_id)
    assert info.state in (JobState.SCHEDULED, JobState.READY)
    assert info.attempts == 0
    assert "no worker here knows job 'only_elsewhere'" in (info.last_error or "")
    assert "tests.worker.apps:app" in (info.last_error or "")
    with Worker(other).in_thread():
        wait_state(other, job_id, JobState.SUCCEEDED)
    assert ran.is_set()
    other.close()


def test_a_job_no_worker_knows_is_dead_after_the_unknown_job_timeout(store: Store) -> None:
    other = _elsewhere(store.url, threading.Event())
    job_id = other.jobs["only_elsewhere"].enqueue("t1")
    other.close()
    worker = store.worker("--burst", "--unknown-job-timeout", "0.5")
    assert worker.exit_code() == 0
    info = job(store.app, job_id)
    assert info.state is JobState.DEAD
    assert info.attempts == 1
    error = info.last_error or ""
    assert "no worker here knows job 'only_elsewhere'" in error
    assert "none ran it within unknown_job_timeout (0.5 s) of its enqueue" in error


def test_concurrency_runs_n_jobs_at_once(store: Store) -> None:
    wd = str(store.workdir)
    ids = [store.app.jobs["rendezvous"].enqueue("t", wd, f"s{i}", 3) for i in range(3)]
    assert store.worker("--concurrency", "3", "--burst").exit_code() == 0
    for job_id in ids:  # each finished only once all three had started
        assert job(store.app, job_id).state is JobState.SUCCEEDED


def test_strict_queue_order_is_honoured(store: Store) -> None:
    append = store.app.jobs["append"]
    wd = str(store.workdir)
    for i in range(3):
        append.options(queue="low").enqueue("t", wd, f"low{i}")
        append.options(queue="high").enqueue("t", wd, f"high{i}")
    worker = store.worker("--queues", "high,low", "--concurrency", "1", "--burst")
    assert worker.exit_code() == 0
    order = (store.workdir / "order.txt").read_text().split()
    assert order == ["high0", "high1", "high2", "low0", "low1", "low2"]


def test_sigterm_finishes_what_fits_in_the_grace_period_and_hands_back_the_rest(
    store: Store,
) -> None:
    wd = str(store.workdir)
    block = store.app.jobs["block"]
    short = block.enqueue("t1", wd, "short")
    long = block.enqueue("t2", wd, "long")
    worker = store.worker("--concurrency", "2", "--grace-period", "3")
    wait_for(lambda: {"short", "long"} <= set(marks(store.workdir, "started")), "both to start")
    worker.signal(signal.SIGTERM)
    worker.wait_log("SIGTERM received")
    later = store.app.jobs["record"].enqueue("t3", wd, "later")  # must not be taken
    go(store.workdir, "short")
    assert worker.exit_code() == 0
    assert job(store.app, short).state is JobState.SUCCEEDED
    handed_back = job(store.app, long)
    assert handed_back.state is JobState.READY
    assert handed_back.attempts == 0
    assert job(store.app, later).state is JobState.READY
    assert "outcome=handed_back" in worker.log()


def test_sigterm_hands_back_the_async_jobs_still_running(
    store: Store,
) -> None:
    wd = str(store.workdir)
    block = store.app.jobs["block_async"]
    ids = {tag: block.enqueue(f"t-{tag}", wd, tag) for tag in ["short", "long1", "long2"]}
    worker = store.worker("--concurrency", "3", "--grace-period", "3", log_level="debug")
    wait_for(lambda: len(marks(store.workdir, "started")) == 3, "all three to start")
    worker.signal(signal.SIGTERM)
    worker.wait_log("SIGTERM received")
    go(store.workdir, "short")
    assert worker.exit_code() == 0
    assert job(store.app, ids["short"]).state is JobState.SUCCEEDED
    for tag in ["long1", "long2"]:
        info = job(store.app, ids[tag])
        assert (info.state, info.attempts) == (JobState.READY, 0)
    assert worker.log().count("outcome=handed_back") == 2


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_during_start_up_exits_0_having_taken_nothing(
    store: Store, signum: signal.Signals
) -> None:
    job_id = store.app.jobs["record"].enqueue("t1", str(store.workdir), "a")
    worker = store.worker(app="tests.worker.slow_app:app")  # loads until we create "loaded"
    worker.wait_log("loading tests.worker.slow_app:app")
    worker.signal(signum)
    (store.workdir / "loaded").touch()
    assert worker.exit_code() == 0
    assert "stopped before it started: no job taken" in worker.log()
    assert "Traceback" not in worker.log()
    info = job(store.app, job_id)
    assert (info.state, info.attempts) == (JobState.READY, 0)


def test_sigkill_mid_job_the_job_comes_back_after_its_lease_and_frees_the_slot(
    store: Store,
) -> None:
    wd = str(store.workdir)
    store.app.set_tenant("default", "t1", max_running=1)
    hangs = store.app.jobs["first_run_hangs"].enqueue("t1", wd, "a")  # lease: 1 s
    queued = store.app.jobs["record"].enqueue("t1", wd, "b")  # waits for t1's only slot
    first = store.worker()
    wait_for(lambda: "a" in marks(store.workdir, "started"), "the job to start")
    assert job(store.app, queued).state is JobState.READY
    first.process.kill()
    assert first.exit_code() == -signal.SIGKILL
    second = store.worker("--burst")
    assert second.exit_code() == 0
    info = job(store.app, hangs)
    assert info.state is JobState.SUCCEEDED
    assert info.attempts == 2
    assert marks(store.workdir, "done")["a"] == second.pid
    assert job(store.app, queued).state is JobState.SUCCEEDED
    (stats,) = store.app.stats(queue="default", tenant="t1")
    assert stats.running == 0


def test_processes_run_jobs_in_distinct_processes_and_exit_0_on_sigterm(store: Store) -> None:
    wd = str(store.workdir)
    ids = [store.app.jobs["rendezvous"].enqueue("t", wd, f"r{i}", 2) for i in range(2)]
    parent = store.worker("--processes", "2", "--concurrency", "1")
    for job_id in ids:  # each finished only once both had started: one per process
        wait_state(store.app, job_id, JobState.SUCCEEDED)
    pids = set(marks(store.workdir, "started").values())
    assert len(pids) == 2
    assert parent.pid not in pids
    parent.signal(signal.SIGTERM)
    assert parent.exit_code() == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_processes_restarts_a_child_that_dies(store: Store) -> None:
    wd = str(store.workdir)
    parent = store.worker("--processes", "2", "--concurrency", "1")
    first = store.app.jobs["record"].enqueue("t", wd, "first")
    wait_state(store.app, first, JobState.SUCCEEDED)
    victim = marks(store.workdir, "done")["first"]
    os.kill(victim, signal.SIGKILL)
    parent.wait_log(f"(pid {victim}) exited unexpectedly")
    wait_for(lambda: parent.log().count(" started: store ") == 3, "a third worker process")
    parent.signal(signal.SIGTERM)
    assert parent.exit_code() == 0


def test_help_works() -> None:
    import subprocess
    import sys

    from .conftest import ROOT

    done = subprocess.run(
        [sys.executable, "-m", "fairq", "worker", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0
    assert "module:attribute" in done.stdout
    assert "--processes" in done.stdout


def test_a_second_sigint_hands_running_jobs_back_at_once(store: Store) -> None:
    job_id = store.app.jobs["block"].enqueue("t1", str(store.workdir), "long")
    worker = store.worker("--grace-period", "600")
    wait_for(lambda: "long" in marks(store.workdir, "started"), "the job to start")
    worker.signal(signal.SIGINT)
    worker.wait_log("SIGINT received")
    worker.signal(signal.SIGINT)
    assert worker.exit_code() == 0
    info = job(store.app, job_id)
    assert info.state is JobState.READY
    assert info.attempts == 0


def test_url_overrides_the_apps_store(store: Store, tmp_path: Path) -> None:
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    other = make_app(other_url)
    job_id = other.jobs["record"].enqueue("t1", str(store.workdir), "elsewhere")
    worker = store.worker("--url", other_url, "--burst")
    assert worker.exit_code() == 0
    assert job(other, job_id).state is JobState.SUCCEEDED
    other.close()
    assert "other.db" in worker.log()


def test_processes_with_burst_exit_0_when_the_work_is_done(store: Store) -> None:
    wd = str(store.workdir)
    ids = [store.app.jobs["record"].enqueue("t", wd, f"r{i}") for i in range(4)]
    parent = store.worker("--processes", "2", "--burst")
    assert parent.exit_code() == 0
    for job_id in ids:
        assert job(store.app, job_id).state is JobState.SUCCEEDED
