"""The two modes without the relay, with a real Celery worker: throttling by re-routing
(``fair.router`` in ``task_routes``) and tenant slots (``base=fair.SlotTask``)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import redis

from fairq.contract import ThrottleWindowsParams

from .conftest import Setup, wait_for
from .test_relay import most_running

pytestmark = pytest.mark.processes


def window(setup: Setup, tenant: str) -> int:
    """How many enqueues of proj.routed for ``tenant`` fairq counted."""
    backend = setup.project.fair.app.backend
    now = setup.project.fair.app.clock()
    found = backend.throttle_windows(ThrottleWindowsParams(keys=[("proj.routed", tenant)], now=now))
    return len(found.get(("proj.routed", tenant), []))


def test_the_router_throttles_a_greedy_tenant_and_counts_each_enqueue_once(setup: Setup) -> None:
    """Rule: over 2 enqueues in 600 s go to the slow queue. The third and fourth of "big" go
    there; "small" stays home; a call with an explicit queue is neither re-routed nor counted;
    Celery's own retry of a job is sent back to its queue and not counted again."""
    project, queue = setup.project, setup.queue
    for i in range(4):
        project.routed.delay("big", f"big{i}", setup.log)
    project.routed.delay("small", "small0", setup.log)
    project.routed.apply_async(("small", "explicit", setup.log), queue=queue)
    broker = redis.Redis.from_url(setup.broker)
    try:
        assert broker.llen(queue) == 4  # big0, big1, small0, explicit
        assert broker.llen(f"{queue}-slow") == 2  # big2, big3
    finally:
        broker.close()
    # "big": the window keeps the last threshold + 1 enqueues; "small": its explicit call
    # was not counted
    assert (window(setup, "big"), window(setup, "small")) == (3, 1)
    setup.worker(concurrency=1)  # serves the home queue; each job there retries once
    wait_for(lambda: len(setup.started_tags()) == 8, "4 jobs run twice each")
    assert Counter(setup.started_tags()) == {t: 2 for t in ("big0", "big1", "small0", "explicit")}
    assert window(setup, "small") == 1  # neither of its two retries was counted


def test_tenant_slots_cap_running_jobs_and_defer_the_others(setup: Setup) -> None:
    """One slot per tenant, three worker slots: a tenant's jobs never overlap, the jobs that
    found no free slot are deferred (sent again for later) and each still runs once."""
    project, queue = setup.project, setup.queue
    tags = [(tenant, f"{tenant}{i}") for tenant, n in (("a", 4), ("b", 2)) for i in range(n)]
    for tenant, tag in tags:
        project.guarded.apply_async((tenant, tag, setup.log), {"work": 0.2}, queue=queue)
    worker = setup.worker(concurrency=3)
    wait_for(
        lambda: sum(what == "end" for what, _, _ in setup.runs()) == len(tags),
        "every guarded job to end",
    )
    assert Counter(setup.started_tags()) == {tag: 1 for _, tag in tags}
    assert most_running(setup, "a") == 1 and most_running(setup, "b") == 1
    worker.wait_log("deferred")  # three of "a"'s jobs at least found its slot taken


def test_a_freed_slot_starts_the_tenant_s_next_waiting_job(setup: Setup) -> None:
    """Cap 1, five jobs of one tenant and three worker slots: each job that found the slot
    taken waits in line, and the release of the slot sends it again at once (its start says
    "woken by a freed slot"): every deferred job is started that way, none by its timed copy
    (due only when a 30 s lease ends), none twice, never two at once."""
    project, queue = setup.project, setup.queue
    tags = [f"a{i}" for i in range(5)]
    ids = [
        project.guarded.apply_async(("a", tag, setup.log), {"work": 0.2}, queue=queue).id
        for tag in tags
    ]
    worker = setup.worker(concurrency=3)
    wait_for(lambda: sum(what == "end" for what, _, _ in setup.runs()) == 5, "every job to end")
    assert Counter(setup.started_tags()) == {tag: 1 for tag in tags}
    assert most_running(setup, "a") == 1
    deferred = set(re.findall(r"job (\S+) \S+ of tenant 'a' deferred", worker.log()))
    woken = re.findall(r"job (\S+) \S+ of tenant 'a' started: woken", worker.log())
    assert deferred and deferred <= set(ids)
    assert sorted(woken) == sorted(deferred)  # each once, each by a release
