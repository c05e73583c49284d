"""Fair actors, the router and tenant slots on a real RabbitMQ broker (Dramatiq's
``RabbitmqBroker``, publisher confirms on), with real workers: the fair order behind a flood,
caps, a connection lost mid-flood, the broker's backlog, and a queue RabbitMQ refuses."""

from __future__ import annotations

import logging
from collections import Counter
from contextlib import AbstractContextManager
from typing import Any

import pytest
import test_dramatiq_peer
import test_dramatiq_relay
from conftest import Harness, wait_for
from dramatiq_tasks import build
from integrations import amqp, relays
from integrations.broker_proxy import Proxy, free_port

from fairq import JobState, Throttle
from fairq.relay import Relay

pytestmark = pytest.mark.processes


def relay_thread(harness: Harness, **options: Any) -> AbstractContextManager[Relay]:
    """A relay of the test's fair queue running in this process (its log is caplog's)."""
    fair = harness.actors.fair
    return relays.relay_thread(fair.app.backend, fair.publisher(), [harness.queue()], **options)


def test_a_newcomer_waits_behind_at_most_in_flight_jobs_on_rabbitmq(
    rabbit_harness: Harness,
) -> None:
    test_dramatiq_relay.test_a_newcomer_waits_behind_at_most_in_flight_jobs_of_a_flood(
        rabbit_harness
    )


def test_a_tenants_cap_holds_on_rabbitmq(rabbit_harness: Harness) -> None:
    harness = rabbit_harness
    app, work = harness.actors.fair.app, harness.actors.work
    app.set_tenant(harness.queue(), "a", max_running=1)
    ids = [work.send(t, n, 0.05).message_id for n in range(6) for t in "ab"]
    harness.worker(threads=3)
    harness.relay(in_flight=3)
    harness.wait_jobs(ids, JobState.SUCCEEDED)
    assert harness.most_running()["a"] == 1
    assert Counter(r.tenant for r in harness.records("start")) == {"a": 6, "b": 6}


def test_a_connection_lost_mid_flood_loses_nothing(rabbit_harness: Harness) -> None:
    """The relay's and the worker's connections to RabbitMQ are cut while a flood drains and
    stay cut a while: the relay says once, in one line, what it waits for; when RabbitMQ
    answers again every job runs exactly once, none spending an attempt."""
    harness = rabbit_harness
    proxy = Proxy(amqp.address())
    through = amqp.via(proxy.port)
    try:
        work = harness.actors.work
        ids = [work.send("flood", n, 0.01).message_id for n in range(40)]
        harness.worker(threads=2, broker_url=through)
        relay = harness.relay(4, through)
        wait_for(lambda: len(harness.records("start")) >= 8, "the flood to be running")
        proxy.down()
        wait_for(lambda: "the broker did not take job" in relay.log(), "the relay to give up")
        tries = proxy.refused
        wait_for(lambda: proxy.refused > tries + 3, "the relay to try RabbitMQ again")
        proxy.up()
        harness.wait_jobs(ids, JobState.SUCCEEDED)
        wait_for(lambda: "the broker takes jobs again" in relay.log(), "the relay's recovery")
    finally:
        proxy.close()
    assert Counter(r.n for r in harness.records("start")) == Counter(range(40))  # once each
    for info in harness.jobs(ids):
        assert info is not None and info.attempts == 1
    lines = relay.log().splitlines()
    errors = [line for line in lines if " ERROR fairq" in line]  # pika logs its own, too
    assert len(errors) == 1, errors  # one line for the whole outage, and nothing else
    assert "the broker did not take job" in errors[0]
    assert f"waiting for the broker to answer at 127.0.0.1:{proxy.port}" in errors[0]


def test_the_router_on_rabbitmq(rabbit_harness: Harness) -> None:
    harness = rabbit_harness
    fair = harness.actors.fair
    home, slow = harness.queue("routed"), harness.queue("slowq")
    harness.extra_queues += [home, slow]
    fair.app.queue(slow)

    @fair.routed_actor(
        tenant="tenant", queue_name=home, throttle=[Throttle(threshold=2, per=60, queue=slow)]
    )
    def routed(tenant: str, n: int) -> None: ...

    sent = [routed.send("a", n).queue_name for n in range(4)] + [routed.send("b", 0).queue_name]
    assert sent == [home, home, slow, slow, home]
    assert (amqp.waiting(home), amqp.waiting(slow)) == (3, 2)


def test_tenant_slots_on_rabbitmq(rabbit_harness: Harness) -> None:
    """One slot for tenant "a": its guarded jobs never overlap; those that found the slot taken
    went back to RabbitMQ with a delay, no retry spent; every job ran once."""
    harness = rabbit_harness
    harness.actors.fair.app.set_tenant(harness.queue("guarded"), "a", max_running=1)
    guarded = harness.actors.guarded
    for n in range(4):
        guarded.send("a", n, 0.05)
    for n in range(2):
        guarded.send("b", n, 0.05)
    worker = harness.worker(threads=3)
    wait_for(lambda: len(harness.records("end")) == 6, "6 guarded jobs to end")
    assert harness.most_running()["a"] == 1
    assert Counter((r.tenant, r.n) for r in harness.records("start")) == {
        **{("a", n): 1 for n in range(4)},
        **{("b", n): 1 for n in range(2)},
    }
    assert "Retrying message" not in worker.log()
    test_dramatiq_peer.assert_woken_by_releases(worker.log())


def test_the_broker_s_backlog_holds_the_relay_back(rabbit_harness: Harness) -> None:
    harness = rabbit_harness
    publisher = harness.actors.fair.publisher()
    queue = harness.queue()
    assert publisher.backlog_size(queue) == 0  # no such queue yet
    broker = harness.actors.broker
    for n in range(3):  # plain messages, sent by someone else
        broker.enqueue(harness.actors.work.message("x", n, 0.0))
    assert publisher.backlog_size(queue) == 3
    assert publisher.backlog_age(queue) is None  # RabbitMQ cannot tell (publish.py)
    backend = harness.actors.fair.app.backend
    assert Relay(backend, publisher, [queue], max_backlog=2)._open_queues() == []
    assert Relay(backend, publisher, [queue], max_backlog=3)._open_queues() == [queue]
    down = build(amqp.via(free_port()), harness.namespace, harness.store_url)
    try:
        assert down.fair.publisher().backlog_size(queue) is None  # unknown: not held back
    finally:
        down.fair.app.close()
        down.broker.close()


def test_a_queue_the_broker_refuses_loses_nothing(
    rabbit_harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """The queue exists with other arguments than Dramatiq declares (PRECONDITION_FAILED): the
    relay says so once, with the fix, and the jobs wait in fairq; once the queue is deleted
    (the fix) they run, none having spent an attempt."""
    harness = rabbit_harness
    amqp.declare(harness.queue(), **{"x-max-length": 1000})
    caplog.set_level(logging.INFO, logger="fairq.relay")
    ids = [harness.actors.work.send("a", n, 0.0).message_id for n in range(3)]

    def refused() -> list[str]:
        return relays.relay_lines(caplog, "did not take")

    with relay_thread(harness, in_flight=2):
        wait_for(refused, "the relay to try the queue")
        (line,) = refused()
        assert "PRECONDITION_FAILED" in line
        assert f"queue {harness.queue()!r} exists on the broker with other arguments" in line
        assert "rabbitmqctl delete_queue -p " in line
        assert not any(info and info.state is JobState.SUCCEEDED for info in harness.jobs(ids))
        amqp.drop([harness.queue()])
        harness.worker(threads=2)
        harness.wait_jobs(ids, JobState.SUCCEEDED)
    assert len(refused()) == 1
    for info in harness.jobs(ids):
        assert info is not None and info.attempts == 1
