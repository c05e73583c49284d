"""The Celery relay, router and tenant slots on a real RabbitMQ broker, with real workers: the
fair order, a newcomer behind a flood, a killed worker, a connection lost mid-flood, the
broker's backlog as backpressure, and what the relay says when RabbitMQ refuses."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections import Counter
from contextlib import AbstractContextManager
from typing import Any

import pytest

from fairq.contract import DequeueParams
from fairq.errors import ConfigError
from fairq.job import Lease
from fairq.relay import Relay

from .. import amqp, relays
from ..broker_proxy import Proxy, free_port
from ..relays import relay_lines
from . import test_modes, test_relay
from .conftest import PROJECT, ROOT, Setup, wait_done, wait_for
from .proj import Project, build

pytestmark = pytest.mark.processes


def relay_thread(project: Project, queue: str, **options: Any) -> AbstractContextManager[Relay]:
    """A relay of ``queue`` running in this process (its log is caplog's)."""
    publisher = project.fair.publisher()
    return relays.relay_thread(project.fair.app.backend, publisher, [queue], **options)


def assert_all_there(setup: Setup, queue: str, ids: list[str]) -> None:
    """Every job of ``ids`` is in fairq to be taken again, none having spent an attempt."""
    app = setup.project.fair.app
    taken: list[Lease] = []

    def take() -> bool:  # a dequeue first ends the holds the relay cut short
        params = DequeueParams(queues=[queue], worker_id="check", now=app.clock(), limit=100)
        taken.extend(app.backend.dequeue(params).leases)
        return len(taken) >= len(ids)

    wait_for(take, "the jobs to be ready again")
    assert sorted(lease.job_id for lease in taken) == sorted(ids)
    assert {lease.attempt for lease in taken} == {1}


def test_fair_order_on_rabbitmq(rabbit_setup: Setup) -> None:
    test_relay.test_fair_order_through_the_relay(rabbit_setup)


def test_a_newcomer_waits_behind_at_most_in_flight_jobs_on_rabbitmq(rabbit_setup: Setup) -> None:
    test_relay.test_a_newcomer_waits_behind_at_most_in_flight_jobs(rabbit_setup)


def test_a_killed_worker_s_job_runs_again_on_rabbitmq(rabbit_setup: Setup) -> None:
    """RabbitMQ also gives the killed worker's unacked message back (acks_late): that copy is
    skipped, the job runs again once, after its lease."""
    test_relay.test_a_killed_worker_s_job_runs_again_after_its_lease(rabbit_setup)


def test_tenant_slots_on_rabbitmq(rabbit_setup: Setup) -> None:
    test_modes.test_tenant_slots_cap_running_jobs_and_defer_the_others(rabbit_setup)


def test_a_freed_slot_wakes_the_next_job_on_rabbitmq(rabbit_setup: Setup) -> None:
    test_modes.test_a_freed_slot_starts_the_tenant_s_next_waiting_job(rabbit_setup)


def test_the_router_on_rabbitmq(rabbit_setup: Setup) -> None:
    """Over 2 enqueues of a tenant in the window go to the slow queue, on RabbitMQ as on Redis;
    each job of the home queue runs (and retries once, uncounted)."""
    setup = rabbit_setup
    project, queue = setup.project, setup.queue
    for i in range(4):
        project.routed.delay("big", f"big{i}", setup.log)
    project.routed.delay("small", "small0", setup.log)
    assert (amqp.waiting(queue), amqp.waiting(f"{queue}-slow")) == (3, 2)
    assert (test_modes.window(setup, "big"), test_modes.window(setup, "small")) == (3, 1)
    setup.worker(concurrency=1)
    wait_for(lambda: len(setup.started_tags()) == 6, "3 jobs run twice each")
    assert Counter(setup.started_tags()) == {t: 2 for t in ("big0", "big1", "small0")}
    assert amqp.waiting(f"{queue}-slow") == 2  # no worker serves it


def test_a_connection_lost_mid_flood_loses_nothing(
    rabbit_setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """The connections to RabbitMQ, the relay's and the worker's, are cut while a flood drains
    and stay cut a while: the relay says once, in one line, what it waits for; when RabbitMQ
    answers again every job runs, each exactly once (RabbitMQ delivers again the messages the
    worker had not acked: those copies are skipped), and none spent an attempt."""
    setup = rabbit_setup
    proxy = Proxy(amqp.address())
    relayed = build(setup.url, amqp.via(proxy.port), setup.queue)  # publishes through the proxy
    caplog.set_level(logging.INFO, logger="fairq.relay")
    project = setup.project
    ids = [
        project.record.apply_async(("flood", f"j{i}", setup.log), queue=setup.queue).id
        for i in range(40)
    ]
    try:
        worker = setup.worker(concurrency=2, broker=amqp.via(proxy.port))
        with relay_thread(relayed, setup.queue, in_flight=4):
            wait_for(lambda: len(setup.started_tags()) >= 8, "the flood to be running")
            proxy.down()  # longer than Celery's own publish retries: the relay must wait
            wait_for(lambda: relay_lines(caplog, "did not take"), "the relay to give up a publish")
            tries = proxy.refused
            wait_for(lambda: proxy.refused > tries + 3, "the relay to try RabbitMQ again")
            proxy.up()
            wait_done(project.fair.app, ids)
        assert "Connection to broker lost" in worker.log()  # the worker's was cut too
    finally:
        relayed.fair.app.close()
        relayed.celery.close()
        proxy.close()
    assert Counter(setup.started_tags()) == {f"j{i}": 1 for i in range(40)}
    for job_id in ids:
        info = project.fair.app.job_info(job_id)
        assert info is not None and info.attempts == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors  # one line for the whole outage, and nothing else
    down = relay_lines(caplog, "the broker did not take job")
    assert down == errors
    assert f"waiting for the broker to answer at 127.0.0.1:{proxy.port}" in down[0]
    assert "\n" not in down[0] and "guest:guest" not in down[0]
    assert len(relay_lines(caplog, "the broker takes jobs again")) == 1


def test_the_broker_s_backlog_holds_the_relay_back(rabbit_setup: Setup) -> None:
    """``max_backlog``: while more messages than that wait in the Celery queue (sent by
    anyone), the relay leaves the queue's jobs in fairq."""
    setup = rabbit_setup
    publisher = setup.project.fair.publisher()
    assert publisher.backlog_size(setup.queue) == 0  # no such queue yet
    for i in range(3):
        setup.project.routed.apply_async(("x", f"plain{i}", setup.log), queue=setup.queue)
    assert publisher.backlog_size(setup.queue) == 3
    assert publisher.backlog_age(setup.queue) is None  # AMQP cannot tell (module docstring)
    relay = Relay(setup.project.fair.app.backend, publisher, [setup.queue], max_backlog=2)
    assert relay._open_queues() == []
    relay = Relay(setup.project.fair.app.backend, publisher, [setup.queue], max_backlog=3)
    assert relay._open_queues() == [setup.queue]
    down = build(setup.url, amqp.via(free_port()), setup.queue)
    try:
        assert down.fair.publisher().backlog_size(setup.queue) is None  # unknown: not held
    finally:
        down.fair.app.close()
        down.celery.close()


def test_a_queue_the_broker_refuses_loses_nothing(
    rabbit_setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """RabbitMQ refuses queue names that start with 'amq.': the relay says so once, with the
    fix, and the jobs wait in fairq, ready, no attempt spent."""
    setup = rabbit_setup
    queue = f"amq.{setup.queue}"
    caplog.set_level(logging.INFO, logger="fairq.relay")
    record = setup.project.record
    ids = [record.apply_async(("a", f"r{i}", setup.log), queue=queue).id for i in range(3)]
    with relay_thread(setup.project, queue, in_flight=5):
        wait_for(lambda: relay_lines(caplog, "did not take"), "the relay to try the queue")
    refused = relay_lines(caplog, "did not take")
    assert len(refused) == 1, refused
    assert "ACCESS_REFUSED" in refused[0]
    fix = f"rename queue {queue!r}: RabbitMQ reserves the names that start with 'amq.'"
    assert fix in refused[0]
    assert_all_there(setup, queue, ids)


def test_a_vhost_the_broker_does_not_have_is_named_with_the_fix(
    rabbit_setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup = rabbit_setup
    host, port = amqp.address()
    wrong = build(setup.url, f"amqp://guest:guest@{host}:{port}/no-such-vhost-fq", setup.queue)
    caplog.set_level(logging.INFO, logger="fairq.relay")
    job = setup.project.record.apply_async(("a", "v0", setup.log), queue=setup.queue).id
    try:
        with relay_thread(wrong, setup.queue):
            wait_for(lambda: relay_lines(caplog, "did not take"), "the relay to try the broker")
    finally:
        wrong.fair.app.close()
        wrong.celery.close()
    (line,) = relay_lines(caplog, "did not take")
    assert "create the vhost (rabbitmqctl add_vhost no-such-vhost-fq;" in line
    assert_all_there(setup, setup.queue, [job])


def test_a_broker_url_celery_cannot_use_stops_the_relay_at_start(rabbit_setup: Setup) -> None:
    setup = rabbit_setup
    bad = build(setup.url, "rabbitmq://guest:secret@127.0.0.1:5672/", setup.queue)
    try:
        with pytest.raises(ConfigError, match=r"cannot use broker URL rabbitmq://guest:\*\*\*@"):
            bad.fair.publisher()
    finally:
        bad.fair.app.close()
        bad.celery.close()
    lib = build(setup.url, "librabbitmq://guest@127.0.0.1:5672/", setup.queue)  # not installed
    try:
        with pytest.raises(ConfigError, match=r"pip install 'celery\[librabbitmq\]'$"):
            lib.fair.publisher()
    finally:
        lib.fair.app.close()
        lib.celery.close()
    done = subprocess.run(
        [sys.executable, "-m", "fairq", "relay", f"{PROJECT}:fair", "--queue", setup.queue],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "FAIRQ_URL": setup.url, "CELERY_BROKER_URL": bad.celery.conf.broker_url},
    )  # fmt: skip
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: Celery cannot use broker URL rabbitmq://guest:***@127.0.0.1")
    assert "RabbitMQ is amqp://USER:PASSWORD@HOST:5672/VHOST" in last
