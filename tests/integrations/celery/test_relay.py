"""fairq in front of real Celery workers: ``.delay()`` stores, ``fairq relay`` releases in fair
order with backpressure, the worker's task reports its end; crashes lose nothing.

Every wait is on a condition (a log line, a job's state) with a deadline; tasks that must stay
running wait on a gate file the test creates.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from fairq import App, JobState
from fairq.cancel import CancelOutcome

from .conftest import Setup, wait_done, wait_for

pytestmark = pytest.mark.processes


def wait_states(setup: Setup, ids: list[str], state: JobState = JobState.SUCCEEDED) -> None:
    wait_done(setup.project.fair.app, ids, state)


def most_running(setup: Setup, tenant: str | None = None) -> int:
    """The most runs (of ``tenant``, or of all) between their start and end lines at once."""
    running = most = 0
    for what, who, _ in setup.runs():
        if tenant is None or who == tenant:
            running += 1 if what == "start" else -1
            most = max(most, running)
    return most


def test_fair_order_through_the_relay(setup: Setup) -> None:
    """Weights 1:3:6, one worker slot: every round of ten runs has each tenant's share,
    within one job, although the heaviest tenant enqueued all of its jobs first.

    Tenants are charged their jobs' real time (from the worker's claim to the end), as
    natively: the jobs do 0.25 s of work each so that a stall shorter than a job moves no
    tenant by more than one job in a round, and a first job warms the worker's pool process up
    (its store connection) while the three tenants are paused, so none of them is charged for
    that."""
    project, queue = setup.project, setup.queue
    weights = {"c": 6.0, "b": 3.0, "a": 1.0}
    for tenant in weights:
        project.fair.app.set_tenant(queue, tenant, weight=0)  # paused: their jobs wait
    rounds = 2
    ids = []
    for tenant, weight in weights.items():  # c's 12 jobs first, then b's 6, then a's 2
        for i in range(int(weight) * rounds):
            call = project.record.apply_async(
                (tenant, f"{tenant}{i}", setup.log), {"work": 0.25}, queue=queue
            )
            ids.append(call.id)
    warm = project.record.apply_async(("warm", "warm", setup.log), queue=queue).id
    setup.worker(concurrency=1)
    setup.relay("--in-flight", "1")
    wait_states(setup, [warm])
    for tenant, weight in reversed(weights.items()):
        project.fair.app.set_tenant(queue, tenant, weight=weight)
    wait_states(setup, ids)
    order = [tag[0] for tag in setup.started_tags() if tag != "warm"]
    assert len(order) == len(ids)
    for r in range(rounds):
        share = Counter(order[r * 10 : (r + 1) * 10])
        for tenant, weight in weights.items():
            assert abs(share[tenant] - weight) <= 1, (r, share, "".join(order))
    assert most_running(setup) == 1


def test_a_newcomer_waits_behind_at_most_in_flight_jobs(redis_setup: Setup) -> None:
    """A flood is running (two jobs out, the in-flight limit, though the worker has three
    slots); a newcomer's job starts right after those two, not after the flood."""
    setup = redis_setup
    project, queue, gate = setup.project, setup.queue, setup.gate()
    flood = [
        project.record.apply_async(("flood", f"f{i}", setup.log, gate), queue=queue).id
        for i in range(20)
    ]
    setup.worker(concurrency=3)
    relay = setup.relay("--in-flight", "2", log_level="debug")
    wait_for(lambda: len(setup.started_tags()) == 2, "two flood jobs running")
    newcomer = project.record.apply_async(("small", "n0", setup.log), queue=queue).id
    setup.open(gate)
    wait_states(setup, [*flood, newcomer])
    # The order the relay released them in (which pool process starts first is a race: a
    # child's first job also opens its store connection). Behind the 2 that were out, then at
    # most one more of the flood's (its next start tag may tie the newcomer's; a tie goes to
    # the older job), not the other 18.
    released = relay.released()
    assert sorted(released) == sorted([*flood, newcomer])
    assert released.index(newcomer) <= 2 + 1, released
    assert most_running(setup) <= 2


def test_a_tenants_cap_is_never_exceeded(sqlite_setup: Setup) -> None:
    setup = sqlite_setup
    project, queue = setup.project, setup.queue
    project.fair.app.set_tenant(queue, "capped", max_running=1)
    ids = [
        project.record.apply_async(
            (tenant, f"{tenant}{i}", setup.log), {"work": 0.05}, queue=queue
        ).id
        for i in range(5)
        for tenant in ("capped", "free")
    ]
    setup.worker(concurrency=3)
    setup.relay("--in-flight", "3")
    wait_states(setup, ids)
    assert most_running(setup, "capped") == 1
    assert most_running(setup) <= 3


def test_a_killed_worker_s_job_runs_again_after_its_lease(setup: Setup) -> None:
    """SIGKILL the whole worker (pool included) mid-job: the job's lease expires, the relay
    releases it again, another worker runs it; the tenant's one slot is free again."""
    project, queue, gate = setup.project, setup.queue, setup.gate()
    project.fair.app.set_tenant(queue, "acme", max_running=1)
    first = project.record_brief.apply_async(("acme", "first", setup.log, gate), queue=queue).id
    second = project.record_brief.apply_async(("acme", "second", setup.log), queue=queue).id
    worker = setup.worker(concurrency=1)
    setup.relay("--in-flight", "1")
    wait_for(lambda: setup.started_tags() == ["first"], "the first job running")
    worker.kill()
    setup.open(gate)
    setup.worker(concurrency=1)
    wait_states(setup, [first, second])
    started = Counter(setup.started_tags())
    # once cut off, once to the end (a heartbeat late past the lease on a loaded machine may
    # add a run: at least once, as the lease promises)
    assert started["first"] >= 2 and started["second"] >= 1, setup.runs()
    info = setup.project.fair.app.job_info(first)
    # every claimed run is an attempt; a message that waited unclaimed for the new worker is
    # not (its relay held it, and gave it back had it waited out its lease): never run twice
    assert info is not None and info.attempts >= started["first"]


def test_a_killed_relay_loses_nothing_another_carries_on(postgres_setup: Setup) -> None:
    setup = postgres_setup
    project, queue, gate = setup.project, setup.queue, setup.gate()
    ids = [
        project.record_brief.apply_async(("acme", f"j{i}", setup.log, gate), queue=queue).id
        for i in range(8)
    ]
    setup.worker(concurrency=2)
    first = setup.relay("--in-flight", "2")
    wait_for(lambda: len(setup.started_tags()) == 2, "two jobs running")
    first.kill()
    setup.relay()  # keeps the in-flight limit the first one stored
    setup.open(gate)
    wait_states(setup, ids)
    assert sorted(setup.started_tags()) == sorted(f"j{i}" for i in range(8))  # each once


def test_two_relays_at_once_release_each_job_once(redis_setup: Setup) -> None:
    setup = redis_setup
    project, queue = setup.project, setup.queue
    ids = [
        project.record.apply_async((f"t{i % 3}", f"j{i}", setup.log), queue=queue).id
        for i in range(40)
    ]
    setup.worker(concurrency=2)
    relays = [setup.relay("--in-flight", "2", "--batch", "1") for _ in range(2)]
    wait_states(setup, ids)
    started = setup.started_tags()
    assert sorted(started) == sorted(f"j{i}" for i in range(40)), Counter(started).most_common(3)
    assert all("expired" not in relay.log() for relay in relays)


def test_delayed_failing_and_unknown_jobs(redis_setup: Setup) -> None:
    """Delayed jobs run when due, not before; a failing task is retried by fairq, then dead;
    a job whose task the Celery app does not have is dead with the reason, the others fine."""
    setup = redis_setup
    project, queue = setup.project, setup.queue
    soon = datetime.now(timezone.utc) + timedelta(seconds=1)
    delayed = [
        project.record.apply_async(("acme", "countdown", setup.log), queue=queue, countdown=1).id,
        project.record.apply_async(("acme", "eta", setup.log), queue=queue, eta=soon).id,
    ]
    failing = project.fail.apply_async(("acme", "fail", setup.log), queue=queue).id
    other = App(setup.url)  # a producer that declares a job the Celery app does not have
    other.job(lambda tenant: None, name="proj.gone", queue=queue, tenant="tenant")
    try:
        gone = other.enqueue("proj.gone", ["acme"])
    finally:
        other.close()
    plain = project.record.apply_async(("acme", "plain", setup.log), queue=queue).id
    setup.worker(concurrency=2)
    relay = setup.relay("--in-flight", "2")
    wait_states(setup, [*delayed, plain])
    for job_id in delayed:
        info = project.fair.app.job_info(job_id)
        assert info is not None and info.started_at is not None
        assert info.started_at >= info.run_at
    wait_states(setup, [failing, gone], JobState.DEAD)
    dead = project.fair.app.job_info(failing)
    assert dead is not None and dead.attempts == 2
    assert dead.last_error is not None and "task fail fails on purpose" in dead.last_error
    assert setup.started_tags().count("fail") == 2
    buried = project.fair.app.job_info(gone)
    assert buried is not None and buried.last_error is not None
    assert "cannot relay: no Celery task named 'proj.gone'" in buried.last_error
    relay.wait_log("no Celery task named 'proj.gone'")


def test_a_running_task_sees_a_cancel_request_and_ends_cancelled(redis_setup: Setup) -> None:
    """The heartbeat's reply reaches ``fairq.current_job()`` in Celery's pool as in a native
    worker: a task that stops on the request ends cancelled, never retried."""
    setup = redis_setup
    job_id = setup.project.stoppable.apply_async(("acme", "s1", setup.log), queue=setup.queue).id
    setup.worker(concurrency=1)
    setup.relay("--in-flight", "1")
    wait_for(lambda: setup.started_tags() == ["s1"], "the task running")
    assert setup.project.fair.app.cancel(job_id) is CancelOutcome.REQUESTED
    wait_states(setup, [job_id], JobState.CANCELLED)
    assert setup.runs() == [("start", "acme", "s1"), ("end", "acme", "s1")]
    info = setup.project.fair.app.job_info(job_id)
    assert info is not None and info.attempts == 1
