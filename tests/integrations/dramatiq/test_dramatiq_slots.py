"""Tenant slots (``routed_actor(slots=True)``) when the broker refuses a parked message's timed
copy: the message leaves its tenant's line and is retried as it came, and still runs once."""

from __future__ import annotations

import time
from collections import Counter

import dramatiq
import pytest
from conftest import Harness, wait_for

from fairq.contract import AcquireSlotParams, ReleaseSlotsParams
from fairq.integrations.dramatiq.slots import WAITER, WOKEN

pytestmark = pytest.mark.processes


@pytest.mark.parametrize("kind", ["redis"])
def test_a_message_whose_timed_copy_the_broker_refused_runs_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slot of tenant "a" (cap 1) is held; the worker's broker refuses every timed copy
    (dramatiq_tasks.RefuseTimedCopies), so the message it parks is retried as it came, again
    and again. Then the slot is released and the parked message it wakes is sent (as another
    worker's release would): message 1 runs once, and message 2 of "a", sent after it ended,
    finds no copy of it left in line ahead."""
    app, guarded = harness.actors.fair.app, harness.actors.guarded
    queue = guarded.queue_name
    app.set_tenant(queue, "a", max_running=1)
    backend = app.backend
    held = backend.acquire_slot(
        AcquireSlotParams(queue=queue, tenant="a", holder="test", lease=60.0, now=time.time())
    )
    assert held.token is not None
    guarded.send_with_options(args=("a", 1, 0.0), min_backoff=50, max_backoff=500)
    monkeypatch.setenv("FAIRQ_TEST_REFUSE_TIMED", "1")
    worker = harness.worker()
    wait_for(lambda: worker.log().count("could not be put back") >= 2, "two refused copies")
    freed = backend.release_slots(ReleaseSlotsParams(tokens=[held.token], now=time.time()))
    for woken in freed.wake:  # what the worker's own wake sends (SlotGuard.wake)
        message = dramatiq.Message.decode(woken.park.encode())
        harness.actors.broker.enqueue(message.copy(options={WAITER: woken.place, WOKEN: True}))
    wait_for(lambda: harness.records("end"), "message 1 to run")
    guarded.send("a", 2, 0.0)
    wait_for(lambda: ("end", 2) in {(r.event, r.n) for r in harness.records()}, "message 2")
    assert Counter(r.n for r in harness.records("start")) == {1: 1, 2: 1}, worker.log()[-3000:]
