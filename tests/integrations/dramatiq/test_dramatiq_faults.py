"""Faults with real processes: a SIGKILLed Dramatiq worker or relay, two relays at once, a
broker that stops answering the relay, a job that always fails."""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from conftest import BROKER_URL, Harness, wait_for
from dramatiq_tasks import LEASE, QUEUE
from integrations.broker_proxy import Proxy

from fairq import JobState


def test_a_killed_worker_s_job_runs_again_after_its_lease_and_frees_its_slot(
    harness: Harness,
) -> None:
    app, actors = harness.actors.fair.app, harness.actors
    app.set_tenant(QUEUE, "a", max_running=1)
    held = actors.hold.send("a", 0).message_id
    after = [actors.work.send("a", n, 0.0).message_id for n in range(1, 4)]
    first = harness.worker(threads=2)
    harness.relay(in_flight=2)
    wait_for(lambda: harness.records("start"), "the held job to start")
    first.kill()  # SIGKILL mid-job: its end is never reported
    harness.release_path.touch()
    harness.worker(threads=2)
    harness.wait_jobs([held, *after], JobState.SUCCEEDED)

    starts = [r.n for r in harness.records("start")]
    assert starts.count(0) == 2  # killed once, run again
    assert sorted(starts) == [0, 0, 1, 2, 3]
    info = app.job_info(held)
    assert info is not None and info.attempts == 2
    assert [s.running for s in app.stats(QUEUE, "a")] == [0]


@pytest.mark.parametrize("kind", ["postgres"])
def test_a_killed_relay_leaves_nothing_behind_another_relay_carries_on(harness: Harness) -> None:
    work = harness.actors.work
    ids = [work.send(t, n, 0.02).message_id for n in range(12) for t in "ab"]
    harness.worker(threads=2)
    first = harness.relay(in_flight=2)
    wait_for(lambda: len(harness.records("end")) >= 4, "the first relay to release jobs")
    first.kill()
    harness.relay(in_flight=2)
    harness.wait_jobs(ids, JobState.SUCCEEDED)
    ran = {(r.tenant, r.n) for r in harness.records("end")}
    assert ran == {(t, n) for n in range(12) for t in "ab"}


@pytest.mark.parametrize("kind", ["redis"])
def test_two_relays_release_each_job_once(harness: Harness) -> None:
    work = harness.use_lease(30.0).work  # no lease can expire during the test
    ids = [work.send(t, n, 0.0).message_id for n in range(20) for t in "abc"]
    harness.relay(in_flight=3)
    harness.relay(in_flight=3)
    harness.worker(threads=3)
    harness.wait_jobs(ids, JobState.SUCCEEDED)
    runs = Counter((r.tenant, r.n) for r in harness.records("start"))
    assert len(runs) == 60
    assert set(runs.values()) == {1}


@pytest.mark.parametrize("kind", ["redis"])
def test_a_broker_outage_is_logged_once_retried_and_loses_nothing(harness: Harness) -> None:
    upstream = urlsplit(BROKER_URL)
    proxy = Proxy((upstream.hostname or "127.0.0.1", upstream.port or 6379))
    through = urlunsplit(upstream._replace(netloc=f"127.0.0.1:{proxy.port}"))
    try:
        work = harness.actors.work
        harness.worker(threads=2)
        relay = harness.relay(in_flight=2, broker_url=through)
        before = [work.send("a", n, 0.0).message_id for n in range(3)]
        harness.wait_jobs(before, JobState.SUCCEEDED)

        proxy.down()
        during = [work.send("a", n, 0.0).message_id for n in range(3, 8)]
        wait_for(lambda: proxy.refused >= 3, "the relay to try the broker again and again")
        assert relay.log().count("the broker did not take job") == 1
        assert not any(info and info.state is JobState.SUCCEEDED for info in harness.jobs(during))

        proxy.up()
        harness.wait_jobs(during, JobState.SUCCEEDED)
        wait_for(lambda: "the broker takes jobs again" in relay.log(), "the relay's recovery")
        runs = Counter(r.n for r in harness.records("start"))
        assert runs == Counter(range(8))
    finally:
        proxy.close()


@pytest.mark.parametrize("kind", ["redis"])
def test_a_failing_actor_is_retried_by_fairq_alone_then_dead(harness: Harness) -> None:
    broken = harness.actors.broken.send("a", 1).message_id
    worker = harness.worker()
    harness.relay(in_flight=1)
    harness.wait_jobs([broken], JobState.DEAD)
    info = harness.actors.fair.app.job_info(broken)
    assert info is not None and info.attempts == 2  # max_retries=1
    assert info.last_error is not None and "broken on purpose" in info.last_error
    assert len(harness.records("start")) == 2
    # Dramatiq's Retries left the fair message alone: nothing waits in its delay queue
    client = redis.Redis.from_url(BROKER_URL)
    assert client.hlen(f"{harness.namespace}:{QUEUE}.DQ.msgs") == 0
    client.close()
    assert "Retrying message" not in worker.log()


@pytest.mark.parametrize("kind", ["sqlite"])
def test_a_job_running_longer_than_its_lease_keeps_it_and_runs_once(harness: Harness) -> None:
    app = harness.actors.fair.app
    held = harness.actors.hold.send("a", 0).message_id
    harness.worker()
    harness.relay(in_flight=1)
    wait_for(lambda: harness.records("start"), "the job to start")
    first = app.job_info(held)
    assert first is not None and first.started_at is not None

    def extended() -> bool:  # half a lease later than its claim could have set it
        info = app.job_info(held)
        return bool(info and info.deadline and info.deadline > first.started_at + 1.5 * LEASE)

    wait_for(extended, "the worker's heartbeat to extend the lease")
    harness.release_path.touch()
    harness.wait_jobs([held], JobState.SUCCEEDED)
    info = app.job_info(held)
    assert info is not None and info.attempts == 1
    assert len(harness.records("start")) == 1
