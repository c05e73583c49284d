"""fairq's router and tenant slots for RQ tasks that stay in RQ (no relay), with real workers."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
import rq_guarded
from conftest import Processes, notes, sqlite_only, wait_for
from redis import Redis
from rq import Queue, Retry
from rq.job import Job
from test_rq_relay import ended, most_at_once

from fairq import App, MissingTenant
from fairq.cli.loader import rebind
from fairq.contract import AcquireSlotParams, ReleaseSlotsParams
from fairq.integrations.rq import DEFERRED_KEY
from fairq.integrations.rq.slots import WAITER_KEY, WOKEN_KEY

HOME, SLOW = rq_guarded.HOME, rq_guarded.SLOW


@pytest.fixture
def guarded(app: App) -> Iterator[App]:
    """The guarded tasks' App on this test's store."""
    rebind(rq_guarded.fair.app, app.url)
    yield rq_guarded.fair.app
    rq_guarded.fair.app.close()


def test_the_router_sends_a_greedy_tenant_to_the_slow_queue(guarded: App, queue_name: str) -> None:
    home = rq_guarded.fair.queue(HOME)
    made: list[Job] = []
    try:
        made += [home.enqueue(rq_guarded.routed, "greedy", n) for n in range(4)]  # type: ignore[misc]
        assert [job.origin for job in made] == [HOME, HOME, SLOW, SLOW]  # > 2 in the window
        made.append(home.enqueue(rq_guarded.routed, "small", 0))  # type: ignore[arg-type]
        assert made[-1].origin == HOME
        later = home.enqueue_in(timedelta(minutes=5), rq_guarded.routed, "greedy", 5)
        made.append(later)  # type: ignore[arg-type]
        assert (
            later.origin == SLOW
            and later.id in Queue(SLOW, connection=home.connection).scheduled_job_registry
        )
        chosen = rq_guarded.fair.queue(queue_name)  # an explicit queue: kept, not counted
        made += [chosen.enqueue(rq_guarded.routed, "quiet", n) for n in range(3)]  # type: ignore[misc]
        assert {job.origin for job in made[-3:]} == {queue_name}
        made.append(home.enqueue(rq_guarded.routed, "quiet", 3))  # type: ignore[arg-type]
        assert made[-1].origin == HOME
        with pytest.raises(MissingTenant, match="has no tenant"):
            home.enqueue(rq_guarded.routed, None, 1)
    finally:
        for job in made:
            job.delete()


@sqlite_only
def test_slots_cap_a_tenant_and_defer_without_spending_retries(
    guarded: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    guarded.set_tenant(queue_name, "capped", max_running=1)
    queue = Queue(queue_name, connection=broker)  # slots need no FairQueue: they act in the worker
    jobs = [("capped", n) for n in range(4)] + [("free", n) for n in range(2)]
    for tenant, n in jobs:
        queue.enqueue(rq_guarded.slotted, tenant, key, n, work=0.2, retry=Retry(max=1))
    processes.worker("rq_guarded", scheduler=True)
    processes.worker("rq_guarded")
    processes.worker("rq_guarded")
    wait_for(lambda: Counter(ended(broker, key)) == Counter(jobs), "every job to run once")
    most, _ = most_at_once(broker, key)
    assert most["capped"] == 1  # though three workers were free
    assert queue.failed_job_registry.count == 0  # deferring spent no retry, failed nothing
    deferred = [
        job_id
        for job_id in queue.finished_job_registry.get_job_ids()
        if DEFERRED_KEY + "_to" in Job.fetch(job_id, connection=broker).meta
    ]
    assert deferred  # the capped tenant's jobs waited in line
    finished = [Job.fetch(i, connection=broker) for i in queue.finished_job_registry.get_job_ids()]
    ran = [job for job in finished if job.return_value() is not None]  # not a dropped copy
    assert sorted((job.args[0], job.args[2]) for job in ran) == sorted(jobs)
    waited = [job for job in ran if job.meta.get(WAITER_KEY)]
    # each job that waited was started by a release's copy, not by its timed copy (due only
    # when a 30 s lease ends, and RQ's scheduler looks once a second)
    assert len(waited) == len(deferred)
    assert all(job.meta.get(WOKEN_KEY) for job in waited)


@sqlite_only
def test_a_slot_is_given_back_when_its_job_raises_and_freed_when_its_worker_dies(
    guarded: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    guarded.set_tenant(queue_name, "c", max_running=1)
    queue = Queue(queue_name, connection=broker)
    queue.enqueue(rq_guarded.slotted, "c", key, 0, fail=True)
    worker = processes.worker("rq_guarded")
    wait_for(lambda: queue.failed_job_registry.count == 1, "the job to fail")

    def take() -> str | None:
        params = AcquireSlotParams(
            queue=queue_name, tenant="c", holder="test", lease=30, now=time.time()
        )
        return guarded.backend.acquire_slot(params).token

    def give(token: str) -> None:
        guarded.backend.release_slots(ReleaseSlotsParams(tokens=[token], now=time.time()))

    token = take()
    assert token is not None  # the failed job gave its slot back
    give(token)
    queue.enqueue(rq_guarded.hang, "c", key, 1)
    wait_for(lambda: any(n == 1 for _, _, n, _ in notes(broker, key)), "the hanging job to start")
    horse = next(pid for _, _, n, pid in notes(broker, key) if n == 1)
    processes.kill(worker, horse)
    assert take() is None  # the dead worker's slot is still held...
    freed: list[str] = []

    def slot_freed() -> bool:
        token = take()
        if token is not None:
            freed.append(token)
        return token is not None

    wait_for(slot_freed, "the dead worker's slot to free at its lease")
    give(freed[0])
