"""What the relay promises, through real processes (on SQLite: the store-specific parts are
in test_rq_relay.py): caps, in-flight, killed and doubled relays, unknown tasks, a broker
outage, delayed jobs, and the example project."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

import rq_reports
import rq_tasks
from conftest import BROKER_URL, Processes, log_of, notes, released, sqlite_only, wait_for
from integrations.broker_proxy import Proxy
from redis import Redis
from rq import Queue
from rq.job import Job
from test_rq_relay import all_in, ended, most_at_once, started

from fairq import App, JobState
from fairq.cli.loader import rebind
from fairq.integrations.rq import SKIPPED_KEY, FairRQ

#: A fair task the relay's source does not know (declared only here, in the producer).
producer_only = FairRQ(rq_tasks.broker, app=rq_tasks.fair.app)


@producer_only.task(queue="rq_t", tenant="tenant")
def ghost(tenant: str) -> None: ...


@sqlite_only
def test_caps_and_in_flight_are_never_exceeded(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    app.set_tenant(queue_name, "capped", max_running=1)
    queue = rq_tasks.fair.queue(queue_name)
    held = [
        queue.enqueue(rq_tasks.record, tenant, key, n, work=0.05)
        for n in range(5)
        for tenant in ("capped", "free")
    ]
    for _ in range(3):
        processes.worker()
    processes.relay(in_flight=2)
    ids = [h.id for h in held]  # type: ignore[union-attr]
    wait_for(lambda: all_in(app, ids, JobState.SUCCEEDED), "every job to succeed")
    most, total = most_at_once(broker, key)
    assert most["capped"] == 1  # its cap, though three workers were idle
    assert total <= 2  # in flight: 2, though three workers were idle


@sqlite_only
def test_a_newcomer_waits_behind_at_most_in_flight_jobs(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    for n in range(40):
        queue.enqueue(rq_tasks.record, "flood", key, n, work=0.02)
    processes.worker()
    processes.relay(in_flight=2)
    wait_for(lambda: len(started(broker, key)) >= 3, "the flood to be under way")
    before = len(notes(broker, key))
    newcomer = queue.enqueue(rq_tasks.record, "newcomer", key, 0)
    wait_for(lambda: all_in(app, [newcomer.id], JobState.SUCCEEDED), "the newcomer's job")  # type: ignore[union-attr]
    later = [(event, tenant) for event, tenant, _, _ in notes(broker, key)[before:]]
    ahead = later[: later.index(("start", "newcomer"))]
    assert ahead.count(("start", "flood")) <= 2  # released before it came, not the flood


@sqlite_only
def test_a_killed_relay_is_replaced_and_nothing_is_lost(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    jobs = [(t, n) for n in range(4) for t in ("a", "b", "c")]
    ids = [queue.enqueue(rq_tasks.record, t, key, n, work=0.05).id for t, n in jobs]  # type: ignore[union-attr]
    processes.worker()
    processes.worker()
    first = processes.relay(in_flight=2)
    wait_for(lambda: len(started(broker, key)) >= 3, "some jobs to start")
    processes.kill(first)
    processes.relay(in_flight=2)
    wait_for(lambda: all_in(app, ids, JobState.SUCCEEDED), "every job to succeed")
    assert Counter(ended(broker, key)) == Counter(jobs)  # each ran to its end once


@sqlite_only
def test_two_relays_release_each_job_once(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    jobs = [(t, n) for n in range(8) for t in ("a", "b")]
    ids = [queue.enqueue(rq_tasks.record, t, key, n, work=0.02).id for t, n in jobs]  # type: ignore[union-attr]
    processes.worker()
    processes.worker()
    processes.relay(in_flight=2)
    processes.relay(in_flight=2)
    wait_for(lambda: all_in(app, ids, JobState.SUCCEEDED), "every job to succeed")
    assert Counter(started(broker, key)) == Counter(jobs)
    # RQ's worker files a job as finished after its work horse (which stored the ack) exits
    finished = Queue(queue_name, connection=broker).finished_job_registry
    wait_for(lambda: finished.count >= len(jobs), "RQ to file every job as finished")
    assert finished.count == len(jobs)


@sqlite_only
def test_a_simple_worker_runs_fair_tasks_in_its_own_process(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    """RQ's SimpleWorker (no work horse): claims, heartbeats and acks from one process."""
    queue = rq_tasks.fair.queue(queue_name)
    ids = [queue.enqueue(rq_tasks.record, t, key, n).id for n, t in enumerate("abc")]  # type: ignore[union-attr]
    failing = queue.enqueue(rq_tasks.boom, "d", key, 3)
    processes.worker(worker_class="rq.SimpleWorker")
    processes.relay(in_flight=1)
    wait_for(lambda: all_in(app, ids, JobState.SUCCEEDED), "every job to succeed")
    wait_for(lambda: all_in(app, [failing.id], JobState.DEAD), "the failing one to be dead")  # type: ignore[union-attr]
    assert len({pid for event, _, _, pid in notes(broker, key) if event == "start"}) == 1


@sqlite_only
def test_a_message_no_worker_claims_within_its_lease_is_released_again(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    """No worker yet: the relay keeps the job's hold while its message waits in RQ, but not
    beyond the job's lease (1 s): a message still unclaimed then was lost, as far as the relay
    can tell, so it gives the job back and releases it again. The worker then skips the older
    copy and runs the job once."""
    queue = rq_tasks.fair.queue(queue_name)
    held = queue.enqueue(rq_tasks.brief, "acme", key, 0)
    waiting = Queue(queue_name, connection=broker)
    relay = processes.relay(in_flight=1)
    wait_for(lambda: waiting.count >= 2, "the job to be released again after its lease")
    assert "no worker claimed it within its lease (1 s) of its release" in log_of(relay)
    processes.worker()
    wait_for(lambda: all_in(app, [held.id], JobState.SUCCEEDED), "the job to succeed")  # type: ignore[union-attr]
    copies = lambda: broker.keys(f"rq:job:{held.id}-*")  # noqa: E731  # type: ignore[union-attr]
    wait_for(lambda: waiting.finished_job_registry.count == len(copies()), "every copy to be done")
    skipped = [
        bool(Job.fetch(k.decode()[7:], connection=broker).meta.get(SKIPPED_KEY)) for k in copies()
    ]
    assert len(skipped) >= 2 and skipped.count(False) == 1  # the newest copy ran
    assert started(broker, key) == [("acme", 0)]  # run once
    assert app.job_info(held.id).attempts == 1  # type: ignore[union-attr]  # given back: no attempt


@sqlite_only
def test_a_killed_relays_unclaimed_jobs_are_released_again_within_its_hold(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    """Two jobs out (in flight 2) in RQ, no worker yet, their relay (``--hold 2``) killed: the
    queue is full until the holds lapse, not for the jobs' lease (60 s); a second relay then
    releases them again, and the worker skips the two stale copies."""
    queue = rq_tasks.fair.queue(queue_name)
    ids = [queue.enqueue(rq_tasks.paced, t, key, 0, 0.0).id for t in ("a", "b")]  # type: ignore[union-attr]
    first = processes.relay("--hold", "2", in_flight=2)
    wait_for(lambda: len(released(first)) == 2, "two jobs in RQ")
    processes.kill(first)
    second = processes.relay(in_flight=2)
    lapsed = "no worker claimed it before its relay's hold lapsed"
    wait_for(lambda: log_of(second).count(lapsed) == 2, "the holds to lapse", timeout=20)
    wait_for(lambda: sorted(released(second)) == sorted(ids), "both released again")
    processes.worker()
    wait_for(lambda: all_in(app, ids, JobState.SUCCEEDED), "both jobs to succeed")
    waiting = Queue(queue_name, connection=broker)
    wait_for(lambda: waiting.finished_job_registry.count == 4, "every copy to be done")
    skipped = [
        bool(Job.fetch(job_id, connection=broker).meta.get(SKIPPED_KEY))
        for job_id in waiting.finished_job_registry.get_job_ids()
    ]
    assert skipped.count(True) == 2  # the dead relay's copies
    assert Counter(started(broker, key)) == {("a", 0): 1, ("b", 0): 1}  # each ran once


@sqlite_only
def test_an_unknown_task_goes_dead_and_the_others_run(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    lost = queue.enqueue(ghost, "acme")
    fine = [queue.enqueue(rq_tasks.record, "acme", key, n).id for n in range(3)]  # type: ignore[union-attr]
    processes.worker()
    relay = processes.relay(in_flight=1)
    wait_for(lambda: all_in(app, fine, JobState.SUCCEEDED), "the known jobs to succeed")
    wait_for(lambda: all_in(app, [lost.id], JobState.DEAD), "the unknown job to be dead")  # type: ignore[union-attr]
    error = app.job_info(lost.id).last_error or ""  # type: ignore[union-attr]
    assert "cannot relay: no fair RQ task named 'test_rq_scenarios.ghost'" in error
    assert "test_rq_scenarios.ghost" in log_of(relay)


@sqlite_only
def test_a_broker_outage_is_logged_once_and_loses_nothing(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    parts = urlsplit(BROKER_URL)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    proxy.down()  # the broker is unreachable from the start
    queue = rq_tasks.fair.queue(queue_name)
    jobs = [("acme", n) for n in range(4)]
    ids = [queue.enqueue(rq_tasks.record, t, key, n).id for t, n in jobs]  # type: ignore[union-attr]
    processes.worker()
    cut = BROKER_URL.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{proxy.port}")
    relay = processes.relay(in_flight=2, RQ_TEST_PUBLISH_URL=cut)
    try:
        wait_for(lambda: "the broker did not take job" in log_of(relay), "the outage to be logged")
        waiting = {JobState.READY, JobState.RUNNING}  # in fairq, or leased by the relay
        assert all(app.job_info(i).state in waiting for i in ids)  # type: ignore[union-attr]
        proxy.up()
        wait_for(lambda: all_in(app, ids, JobState.SUCCEEDED), "every job to succeed")
    finally:
        proxy.close()
    log = log_of(relay)
    assert [app.job_info(i).attempts for i in ids] == [1] * len(ids)  # type: ignore[union-attr]
    assert log.count("logged once per outage") == 1
    assert log.count("the broker takes jobs again") == 1
    assert Counter(ended(broker, key)) == Counter(jobs)


@sqlite_only
def test_the_example_runs_delayed_reports_when_due(
    app: App, processes: Processes, queue_name: str, broker: Redis
) -> None:
    rebind(rq_reports.fair.app, app.url)
    reports = rq_reports.fair.queue(queue_name)
    build = rq_reports.build_report
    try:
        soon = reports.enqueue_in(timedelta(seconds=1), build, "acme", "2026-10")
        due = datetime.now(timezone.utc) + timedelta(seconds=1.5)
        later = reports.enqueue_at(due, build, "beta", "2026-11")
        now = reports.enqueue(build, "gamma", "2026-12")
        enqueued = time.time()
        processes.worker(module="rq_reports")
        processes.relay(in_flight=1, module="rq_reports")
        held = [soon, later, now]
        ids = [h.id for h in held]  # type: ignore[union-attr]
        wait_for(lambda: all_in(app, ids, JobState.SUCCEEDED), "the reports to be built")
        infos = [app.job_info(i) for i in ids]
        assert infos[0].run_at >= enqueued - 0.5 + 1  # type: ignore[union-attr]
        assert infos[1].run_at == due.timestamp()  # type: ignore[union-attr]
        for info in infos[:2]:
            assert info.started_at >= info.run_at  # type: ignore[union-attr, operator]
        finished = Queue(queue_name, connection=broker).finished_job_registry.get_job_ids()
        results = {}
        for job_id in finished:
            results[job_id.split("-")[0]] = Job.fetch(job_id, connection=broker).return_value()
        assert results == {
            ids[0]: "report of acme for 2026-10",
            ids[1]: "report of beta for 2026-11",
            ids[2]: "report of gamma for 2026-12",
        }
    finally:
        rq_reports.fair.app.close()
