"""Weights hold through RQ at two slots (issue #28): two ``rq worker`` processes, ``fairq
relay`` with two jobs in flight, no cost declared (fairq learns it), jobs of 50 ms.

A cold start: the relay's first jobs wait in RQ while the workers start, and that wait is not
their tenants' service: their runs start at the workers' claims. How shares and waits are
judged, and why "2 x (tenants / slots) starts" is read as twice the fair gap:
tests/integrations/shares.py."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import rq_tasks
from conftest import Processes, released, wait_for
from integrations.shares import (
    EQUAL,
    MEASURED,
    SLOTS,
    UNEQUAL,
    WARM_UP,
    WINDOWS,
    WORK,
    Runs,
    claimed_after,
    judged,
    measurer,
)
from redis import Redis
from rq import Queue
from test_rq_relay import started

from fairq import App

# charged real run time: other test processes stall runs (see shares.py)
pytestmark = pytest.mark.alone


def start(
    app: App, processes: Processes, queue: str, key: str, broker: Redis, weights: dict[str, float]
) -> tuple[Callable[[int], Runs], Callable[[], None]]:
    """Backlog every tenant through every window, start the relay, then (its first jobs in
    RQ) the workers. Returns ``measure``, and the check that the first runs started at their
    claims."""
    for tenant, weight in weights.items():
        app.set_tenant(queue, tenant, weight=weight)
    fair = rq_tasks.fair.queue(queue)
    calls = [(t, n) for n in range(WARM_UP + WINDOWS * MEASURED) for t in weights]
    held = fair.enqueue_many(
        [Queue.prepare_data(rq_tasks.paced, (t, key, n, WORK)) for t, n in calls]
    )
    ids = {call: h.id for call, h in zip(calls, held, strict=True)}
    relay = processes.relay(in_flight=SLOTS)
    wait_for(lambda: len(released(relay)) >= SLOTS, "the first jobs in RQ")
    workers_started = time.time()
    for _ in range(SLOTS):
        processes.worker()
    starts = lambda: [ids[call] for call in started(broker, key)]  # noqa: E731
    measure = measurer(app, lambda: released(relay), starts)
    return measure, lambda: claimed_after(app, released(relay)[:SLOTS], workers_started)


def test_weights_1_3_6_give_their_shares_at_two_slots(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    """10/30/60 % of the jobs after the warm-up, each within 5 points; no tenant waits more
    than twice its fair gap (tests/integrations/shares.py)."""
    judged(start(app, processes, queue_name, key, broker, UNEQUAL), UNEQUAL)


def test_equal_weights_take_turns_at_two_slots(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    """Three tenants of equal weight take turns: none waits more than twice its fair gap
    (why not the literal "2 x (tenants / slots) starts": tests/integrations/shares.py)."""
    judged(start(app, processes, queue_name, key, broker, EQUAL), EQUAL)
