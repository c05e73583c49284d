"""Tenant slots (``base=fair.SlotTask``) when the broker refuses a parked job's timed copy:
the job is given back to the broker as it was, and still runs once."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from fairq.contract import AcquireSlotParams, ReleaseSlotsParams
from fairq.integrations.celery.slots import wake

from .conftest import Setup, wait_for

pytestmark = pytest.mark.processes

DEAD_BROKER = "redis://127.0.0.1:1/0"  # nothing listens there: every send to it fails


def test_a_job_whose_timed_copy_the_broker_refused_runs_once(
    redis_setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slot of tenant "a" (cap 1) is held; the worker's own sends all fail, so the job it
    parks cannot get its timed copy out and is requeued, again and again. Then the slot is
    released and the parked job it wakes is sent (as another worker's release would): the
    job runs once, whichever of the woken copy and the requeued original comes first."""
    setup = redis_setup
    project, queue = setup.project, setup.queue
    backend = project.fair.app.backend
    held = backend.acquire_slot(
        AcquireSlotParams(queue=queue, tenant="a", holder="test", lease=60.0, now=time.time())
    )
    assert held.token is not None
    project.guarded.apply_async(("a", "once", setup.log), queue=queue)
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", DEAD_BROKER)
    worker = setup.worker(concurrency=1)
    worker.wait_log("did not take the job back", count=2)  # parked, requeued, twice
    freed = backend.release_slots(ReleaseSlotsParams(tokens=[held.token], now=time.time()))
    for woken in freed.wake:
        wake(project.celery, woken)
    wait_for(lambda: "once" in setup.started_tags(), "the job to run")
    project.guarded.apply_async(("z", "after", setup.log), queue=queue)
    wait_for(lambda: "after" in setup.started_tags(), "a later job to run")  # the queue is past
    assert Counter(setup.started_tags()) == {"once": 1, "after": 1}
