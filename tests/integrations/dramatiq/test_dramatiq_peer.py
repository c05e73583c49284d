"""The router and tenant slots for plain Dramatiq actors (no relay): fairq's throttle rules
choose a send's queue; a tenant's cap holds in real workers without spending retries."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import redis
from conftest import BROKER_URL, Harness, wait_for

from fairq import MissingTenant, Throttle
from fairq.contract import ThrottleWindowsParams


def test_the_router_sends_a_greedy_tenant_s_new_messages_to_the_slower_queue(
    harness: Harness,
) -> None:
    fair = harness.actors.fair
    fair.app.queue("slowq")

    @fair.routed_actor(
        tenant="tenant",
        queue_name="routed",
        throttle=[Throttle(threshold=2, per=60, queue="slowq")],
    )
    def routed(tenant: str, n: int) -> None: ...

    sent = [routed.send("a", n).queue_name for n in range(5)]
    assert sent == ["routed", "routed", "slowq", "slowq", "slowq"]  # over 2 in the window
    assert routed.send("b", 0).queue_name == "routed"

    def window() -> list[float]:
        params = ThrottleWindowsParams(keys=[("routed", "a")], now=fair.app.clock())
        return fair.app.backend.throttle_windows(params)[("routed", "a")]

    before = window()
    explicit = routed.send_with_options(args=("a", 9), queue_name="routed")
    assert explicit.queue_name == "routed"  # chosen by the caller: not routed
    assert window() == before  # and not counted
    client = redis.Redis.from_url(BROKER_URL)
    ns = harness.namespace
    assert (client.llen(f"{ns}:routed"), client.llen(f"{ns}:slowq")) == (4, 3)
    client.close()
    assert "slowq" in harness.actors.broker.get_declared_queues()
    with pytest.raises(MissingTenant, match="actor 'routed' was sent without a tenant"):
        routed.send("", 1)


@pytest.mark.parametrize("kind", ["redis"])
def test_tenant_slots_hold_a_cap_in_real_workers_without_spending_retries(
    harness: Harness,
) -> None:
    harness.actors.fair.app.set_tenant("guarded", "a", max_running=1)
    guarded = harness.actors.guarded
    for n in range(5):
        guarded.send("a", n, 0.05)
    for n in range(3):
        guarded.send("b", n, 0.05)
    worker = harness.worker(threads=4)
    wait_for(lambda: len(harness.records("end")) == 8, "8 guarded jobs to end")

    most = harness.most_running()
    assert most["a"] == 1
    assert Counter(r.tenant for r in harness.records("start")) == {"a": 5, "b": 3}
    log = worker.log()
    assert "Retrying message" not in log
    assert_woken_by_releases(log)


def assert_woken_by_releases(log: str) -> None:
    """Each message that found its tenant's slot taken waited in line and was started by the
    release of a slot (sent again at once: "woken"), not by its timed copy (due only when a
    30 s lease ends); each was deferred once, so none was put back again and again."""
    deferred = re.findall(r"message (\S+) of tenant '\w+' deferred", log)
    woken = re.findall(r"message (\S+) of tenant '\w+' started: woken", log)
    assert deferred  # at least one of "a"'s found its slot taken
    assert sorted(woken) == sorted(deferred)  # each deferral once, each ended by a release
