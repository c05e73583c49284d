"""Fair actors through ``fairq relay`` into real Dramatiq workers: order, caps, backpressure,
delays, and the errors a producer or the relay meets."""

from __future__ import annotations

import time
from collections import Counter

import dramatiq
import pytest
from conftest import Harness, wait_for
from dramatiq_tasks import QUEUE

from fairq import JobArgumentsError, JobState, MissingTenant
from fairq.errors import ConfigError
from fairq.relay import Relay


@pytest.mark.alone  # charged real run time: other test processes stall runs and tip a round
def test_weights_1_3_6_hold_in_every_round_through_one_worker_slot(harness: Harness) -> None:
    """Three backlogged tenants, one Dramatiq thread, one job in flight: the first two rounds of
    ten jobs give each tenant its weight's share, within one job. (fairq is fair in
    worker-seconds: each run is charged its real time from its claim to its end, so a run that
    the machine stalls costs its tenant turns later; the rounds after it may drift, by
    design.)"""
    weights = {"a": 1, "b": 3, "c": 6}
    app, paced = harness.actors.fair.app, harness.actors.paced
    for tenant, weight in weights.items():
        app.set_tenant(QUEUE, tenant, weight=weight)
    harness.worker(threads=1)
    harness.relay(in_flight=1)
    # A first job takes the one slot while the others are sent (and pays for cold starts).
    harness.actors.hold.send("warm-up", 0)
    wait_for(lambda: harness.records("start"), "the first job to start")
    ids = [paced.send(t, n, 0.05).message_id for t, w in weights.items() for n in range(4 * w)]
    harness.release_path.touch()
    harness.wait_jobs(ids, JobState.SUCCEEDED)

    order = [r.tenant for r in harness.records("start") if r.tenant != "warm-up"]
    assert len(order) == 40  # each job ran once
    for start in (0, 10):
        got = Counter(order[start : start + 10])
        for tenant, weight in weights.items():
            assert abs(got[tenant] - weight) <= 1, f"round {start // 10}: {order}"


@pytest.mark.parametrize("kind", ["redis"])
def test_a_tenants_cap_holds_with_more_worker_threads(harness: Harness) -> None:
    app, work = harness.actors.fair.app, harness.actors.work
    app.set_tenant(QUEUE, "a", max_running=1)
    app.set_tenant(QUEUE, "b", max_running=2)
    ids = [work.send(t, n, 0.05).message_id for n in range(8) for t in "ab"]
    harness.worker(threads=4)
    harness.relay(in_flight=4)
    harness.wait_jobs(ids, JobState.SUCCEEDED)

    most = harness.most_running()
    assert most["a"] == 1
    assert most["b"] <= 2


@pytest.mark.parametrize("kind", ["sqlite"])
def test_a_newcomer_waits_behind_at_most_in_flight_jobs_of_a_flood(harness: Harness) -> None:
    work = harness.actors.work
    flood = [work.send("big", n, 0.05).message_id for n in range(40)]
    harness.worker(threads=1)
    harness.relay(in_flight=2)
    wait_for(lambda: len(harness.records("start")) >= 3, "the flood to start")
    harness.note("newcomer")
    small = work.send("small", 0, 0.0).message_id
    harness.wait_jobs([small], JobState.SUCCEEDED)

    events = [(r.event, r.tenant) for r in harness.records()]
    since = events[events.index(("newcomer", "-")) :]
    ahead = since[: since.index(("start", "small"))].count(("start", "big"))
    assert ahead <= 2, f"{ahead} jobs of the flood started before the newcomer's"
    before = events[: events.index(("start", "small"))].count(("start", "big"))
    assert before < len(flood)  # it did not wait out the flood


@pytest.mark.parametrize("kind", ["sqlite"])
def test_delayed_jobs_wait_in_fairq_until_due(harness: Harness) -> None:
    work = harness.actors.work
    later = work.send_with_options(args=("a", 1), kwargs={"seconds": 0.0}, delay=1500)
    now = work.send("a", 2, 0.0)
    info = harness.actors.fair.app.job_info(later.message_id)
    assert info is not None and info.state is JobState.SCHEDULED
    harness.worker()
    harness.relay(in_flight=2)
    harness.wait_jobs([now.message_id, later.message_id], JobState.SUCCEEDED)
    done = harness.actors.fair.app.job_info(later.message_id)
    assert done is not None and done.started_at is not None
    assert done.started_at >= info.run_at  # not released before it was due


@pytest.mark.parametrize("kind", ["sqlite"])
def test_an_actor_the_relay_does_not_know_is_dead_with_the_reason_others_run(
    harness: Harness,
) -> None:
    @harness.actors.fair.actor(tenant="tenant", queue_name=QUEUE)
    def renamed(tenant: str) -> None: ...

    gone = renamed.send("a").message_id
    ids = [harness.actors.work.send("a", n, 0.0).message_id for n in range(3)]
    harness.worker()
    harness.relay(in_flight=2)
    harness.wait_jobs(ids, JobState.SUCCEEDED)
    harness.wait_jobs([gone], JobState.DEAD)
    info = harness.actors.fair.app.job_info(gone)
    assert info is not None and info.last_error is not None
    assert "no Dramatiq actor named 'renamed'" in info.last_error


@pytest.mark.parametrize("kind", ["sqlite"])
def test_bad_sends_fail_at_the_call_and_store_nothing(harness: Harness) -> None:
    work, fair = harness.actors.work, harness.actors.fair

    @fair.actor(queue_name=QUEUE)
    def anyone(n: int) -> None: ...

    with pytest.raises(MissingTenant, match="fair actor 'anyone' was sent without a tenant"):
        anyone.send(1)
    with pytest.raises(MissingTenant, match="its tenant argument 'tenant' is missing or empty"):
        work.send("", 1, 0.0)
    with pytest.raises(JobArgumentsError, match="cannot be stored as JSON"):
        work.send("a", 1, {1: "x"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="on_success cannot travel through fairq"):
        work.send_with_options(args=("a", 1), on_success="other")
    assert fair.app.stats() == []
    sent = anyone.send_with_options(args=(1,), fair_tenant="given")
    info = fair.app.job_info(sent.message_id)
    assert info is not None and info.tenant == "given"


def test_fair_actor_without_fairdramatiq_is_refused() -> None:
    import dramatiq
    from dramatiq.brokers.stub import StubBroker

    from fairq.integrations.dramatiq import FairActor

    broker = StubBroker()
    with pytest.raises(ConfigError, match=r"has no FairDramatiq: make fair = FairDramatiq"):

        @dramatiq.actor(actor_class=FairActor, broker=broker)
        def lonely() -> None: ...


@pytest.mark.parametrize("kind", ["sqlite"])
def test_the_publisher_reads_the_redis_broker_s_backlog(harness: Harness) -> None:
    """On Redis, Dramatiq's queue tells how many messages wait and the oldest one's age (its
    ``message_timestamp``): ``--max-backlog`` and ``--max-backlog-age`` hold the queue back."""
    fair, work = harness.actors.fair, harness.actors.work
    publisher = fair.publisher()
    assert (publisher.backlog_size(QUEUE), publisher.backlog_age(QUEUE)) == (0, 0.0)
    an_hour_ago = int((time.time() - 3600) * 1000)
    old = work.message("x", 0, 0.0)
    harness.actors.broker.enqueue(
        dramatiq.Message(**{**old.asdict(), "message_timestamp": an_hour_ago})
    )
    harness.actors.broker.enqueue(work.message("x", 1, 0.0))
    assert publisher.backlog_size(QUEUE) == 2
    age = publisher.backlog_age(QUEUE)
    assert age is not None and 3599 <= age < 3700
    backend = fair.app.backend
    assert Relay(backend, publisher, [QUEUE], max_backlog_age=60)._open_queues() == []
    assert Relay(backend, publisher, [QUEUE], max_backlog=1)._open_queues() == []
    assert Relay(backend, publisher, [QUEUE], max_backlog=2)._open_queues() == [QUEUE]
