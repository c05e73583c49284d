"""The producer side in one process: what a fair enqueue stores, and the errors at the call."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
import rq_tasks
from conftest import sqlite_only
from integrations.broker_proxy import free_port
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry as RedisRetry
from rq import Queue, Retry
from rq.job import Job

from fairq import App, ConfigError, JobArgumentsError, JobState, MissingTenant
from fairq.integrations.rq import FairQueue, FairRQ, Held
from fairq.relay import Relay, RelaySource

pytestmark = sqlite_only


def test_a_fair_enqueue_is_held_in_fairq_not_rq(app: App, queue_name: str, broker: Redis) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    assert isinstance(queue, FairQueue) and isinstance(queue, Queue)
    held = queue.enqueue(rq_tasks.record, "acme", "k", 1, work=0.5)
    assert isinstance(held, Held)
    info = held.info()
    assert info is not None
    assert (info.name, info.queue, info.tenant, info.state) == (
        "rq_tasks.record",
        queue_name,
        "acme",
        JobState.READY,
    )
    assert queue.count == 0  # nothing in RQ until the relay releases it
    by_path = queue.enqueue_call("rq_tasks.record", args=("beta", "k", 2))
    assert isinstance(by_path, Held) and by_path.info().tenant == "beta"  # type: ignore[union-attr]


def test_other_functions_still_go_to_rq(app: App, queue_name: str) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    job = queue.enqueue(rq_tasks.plain, 7)
    assert isinstance(job, Job) and queue.count == 1
    assert app.stats(queue=queue_name) == []


def test_no_tenant_is_an_error_at_the_call(app: App, queue_name: str) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    with pytest.raises(MissingTenant, match=r"rq_tasks.record.*has no tenant"):
        queue.enqueue(rq_tasks.record, None, "k", 1)
    with pytest.raises(MissingTenant):
        queue.enqueue_in(timedelta(seconds=5), rq_tasks.record, "", "k", 1)
    assert app.stats(queue=queue_name) == []


def test_rq_options_a_fair_task_cannot_honour_are_refused(app: App, queue_name: str) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    with pytest.raises(ConfigError, match=r"retry=.*max_attempts"):
        queue.enqueue(rq_tasks.record, "acme", "k", 1, retry=Retry(max=3))
    with pytest.raises(ConfigError, match=r"timeout=.*job_timeout"):
        queue.enqueue(rq_tasks.record, "acme", "k", 1, job_timeout=30)
    with pytest.raises(ConfigError, match="depends_on="):
        queue.enqueue(rq_tasks.record, "acme", "k", 1, depends_on="x")
    with pytest.raises(ConfigError, match="prepared rq Job"):
        queue.enqueue_job(queue.create_job(rq_tasks.record, args=("acme", "k", 1)))
    assert app.stats(queue=queue_name) == []


def test_bad_arguments_are_refused_at_the_call(app: App, queue_name: str) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    with pytest.raises(JobArgumentsError, match="do not fit"):
        queue.enqueue(rq_tasks.record, "acme", "k", 1, colour="red")
    with pytest.raises(JobArgumentsError):
        queue.enqueue(rq_tasks.record, "acme", "k", object())
    assert app.stats(queue=queue_name) == []


def test_enqueue_in_and_at_wait_in_fairq(app: App, queue_name: str) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    before = time.time()
    later = queue.enqueue_in(timedelta(minutes=5), rq_tasks.record, "acme", "k", 1)
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    fixed = queue.enqueue_at(at, rq_tasks.record, "acme", "k", 2)
    naive = queue.enqueue_at(datetime.now() + timedelta(hours=2), rq_tasks.record, "acme", "k", 3)
    infos = [h.info() for h in (later, fixed, naive)]  # type: ignore[union-attr]
    assert all(i is not None and i.state is JobState.SCHEDULED for i in infos)
    assert infos[0].run_at >= before + 300  # type: ignore[union-attr]
    assert infos[1].run_at == pytest.approx(at.timestamp())  # type: ignore[union-attr]
    assert infos[2].run_at >= before + 7200 - 1  # naive: local time, as RQ reads it
    assert queue.count == 0


def test_enqueue_many_stores_fair_calls_together(app: App, queue_name: str) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    held = queue.enqueue_many(
        [
            Queue.prepare_data(rq_tasks.record, ("a", "k", 1)),
            Queue.prepare_data(rq_tasks.record, ("b", "k", 2)),
        ]
    )
    assert [h.info().tenant for h in held] == ["a", "b"]  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="two calls"):
        queue.enqueue_many(
            [
                Queue.prepare_data(rq_tasks.record, ("a", "k", 1)),
                Queue.prepare_data(rq_tasks.plain, (1,)),
            ]
        )
    with pytest.raises(MissingTenant):  # one bad call: none is stored
        queue.enqueue_many(
            [
                Queue.prepare_data(rq_tasks.record, ("c", "k", 1)),
                Queue.prepare_data(rq_tasks.record, (None, "k", 2)),
            ]
        )
    assert sorted(s.tenant for s in app.stats(queue=queue_name)) == ["a", "b"]


def test_declaring_a_fair_task_checks_it(app: App, broker: Redis) -> None:
    fair = FairRQ(broker, app=App("memory://"))
    with pytest.raises(ConfigError, match=r"needs tenant="):
        fair.task(tenant=None)
    with pytest.raises(ConfigError, match="takes no argument 'account'"):
        fair.task(tenant="account")(rq_tasks.plain)

    def local(tenant: str) -> None: ...

    with pytest.raises(ConfigError, match="module-level function"):
        fair.task(tenant="tenant")(local)
    with pytest.raises(ConfigError, match="job_timeout must be whole seconds"):
        fair.task(tenant="tenant", job_timeout=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"redis\.Redis"):
        FairRQ("redis://localhost")  # type: ignore[arg-type]


def test_a_fair_task_called_directly_just_runs(app: App, key: str, broker: Redis) -> None:
    assert rq_tasks.record("acme", key, 5) == 5
    assert broker.llen(key) == 2


def test_the_integration_is_a_relay_source(app: App) -> None:
    assert isinstance(rq_tasks.fair, RelaySource)
    assert rq_tasks.fair.relay_queues() == ["rq_t"]


def test_backlog_age_reads_rq_s_oldest_waiting_job(
    app: App, queue_name: str, broker: Redis
) -> None:
    publisher = rq_tasks.fair.publisher()
    assert publisher.backlog_age(queue_name) == 0.0
    assert publisher.backlog_size(queue_name) == 0
    job = Queue(queue_name, connection=broker).enqueue(rq_tasks.plain, 1)
    assert publisher.backlog_size(queue_name) == 1
    an_hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    broker.hset(job.key, "enqueued_at", an_hour_ago.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    age = publisher.backlog_age(queue_name)
    assert age is not None and age >= 3599
    relay = Relay(app.backend, publisher, [queue_name], max_backlog_age=60)
    assert relay._open_queues() == []  # held back while RQ is an hour behind
    unreachable = Redis(port=free_port(), retry=RedisRetry(NoBackoff(), 0))
    down = FairRQ(unreachable, app=app).publisher()
    assert down.backlog_age(queue_name) is None  # unknown: the relay goes on and finds out
    assert down.backlog_size(queue_name) is None
