"""Tenant slots on RQ (``@fair.guard(slots=…)``) when Redis refuses a parked job's timed copy:
the job fails as it came (no place in line), and still runs once."""

from __future__ import annotations

import time

import rq_guarded
from conftest import Processes, sqlite_only, wait_for
from redis import Redis
from rq import Queue, Retry
from test_rq_guard import guarded  # noqa: F401  (the fixture)
from test_rq_relay import ended

from fairq import App
from fairq.contract import AcquireSlotParams, ReleaseSlotsParams
from fairq.integrations.rq.slots import wake


@sqlite_only
def test_a_job_whose_timed_copy_redis_refused_runs_once(
    guarded: App,  # noqa: F811
    processes: Processes,
    queue_name: str,
    key: str,
    broker: Redis,
) -> None:
    """The slot of tenant "c" (cap 1) is held; the queue's scheduled registry holds a string,
    so Redis refuses every timed copy (WRONGTYPE): each of the job's two attempts parks it and
    fails. Then the slot is released and what it wakes is enqueued (as another worker's
    release would), and the failed job is requeued: it runs once."""
    guarded.set_tenant(queue_name, "c", max_running=1)
    held = guarded.backend.acquire_slot(
        AcquireSlotParams(queue=queue_name, tenant="c", holder="test", lease=60, now=time.time())
    ).token
    assert held is not None
    queue = Queue(queue_name, connection=broker)
    broker.set(queue.scheduled_job_registry.key, "not a sorted set")
    try:
        job = queue.enqueue(rq_guarded.slotted, "c", key, 1, retry=Retry(max=1))
        processes.worker("rq_guarded")
        wait_for(lambda: job.id in queue.failed_job_registry, "both attempts to fail")
        freed = guarded.backend.release_slots(ReleaseSlotsParams(tokens=[held], now=time.time()))
        for woken in freed.wake:
            wake(broker, job.serializer, woken)
        queue.failed_job_registry.requeue(job.id)
        wait_for(lambda: ("c", 1) in ended(broker, key), "the job to run")
        queue.enqueue(rq_guarded.slotted, "z", key, 2)
        wait_for(lambda: ("z", 2) in ended(broker, key), "a later job to run")  # queue is past
        assert ended(broker, key).count(("c", 1)) == 1
    finally:
        broker.delete(queue.scheduled_job_registry.key)
