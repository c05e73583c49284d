"""``fairq worker --metrics-port``: a real worker process, scraped over HTTP while it runs, the
exposition parsed with prometheus_client's own parser."""

from __future__ import annotations

import re
import signal
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fairq import JobState

from .conftest import Store, WorkerProcess
from .helpers import go, marks, wait_for, wait_state

pytestmark = pytest.mark.processes

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metrics_url(worker: WorkerProcess) -> str:
    worker.wait_log("metrics at http://")
    found = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", worker.log())
    assert found is not None, worker.log()
    return found.group(1)


def by_tenant(samples: Samples, name: str) -> dict[str, float]:
    return {
        dict(labels)["tenant"]: value
        for (sample, labels), value in samples.items()
        if sample == name and dict(labels)["queue"] == "default"
    }


def jobs_total(samples: Samples) -> dict[str, float]:
    return {
        dict(labels)["outcome"]: value
        for (sample, labels), value in samples.items()
        if sample == "fairq_jobs_total" and dict(labels)["queue"] == "default"
    }


def test_a_worker_serves_what_it_ran_and_the_stores_tenants(store: Store) -> None:
    wd = str(store.workdir)
    record = store.app.jobs["record"]
    blocking = [store.app.jobs["block"].enqueue(who, wd, who) for who in ("a", "b")]
    worker = store.worker("--concurrency", "2", "--metrics-port", "0", "--metrics-tenants", "2")
    url = metrics_url(worker)
    wait_for(lambda: len(marks(store.workdir, "started")) == 2, "both slots taken")
    # Both slots are held: what comes now stays ready until the blocking jobs end.
    backlog = {"big": 5, "mid": 3, "small1": 1, "small2": 1}
    ids = [record.enqueue(who, wd, f"{who}{i}") for who, n in backlog.items() for i in range(n)]
    bad = store.app.jobs["explode"].enqueue("small1", "disk full")  # retried once, then dead

    during = scrape(url)
    assert during[("fairq_store_up", ())] == 1
    assert by_tenant(during, "fairq_tenant_ready_jobs") == {
        "big": 5, "mid": 3, "other": 3,  # small1 (2 jobs) and small2; a and b have none ready
    }  # fmt: skip
    assert by_tenant(during, "fairq_tenant_running_jobs") == {"big": 0, "mid": 0, "other": 2}
    assert during[("fairq_queue_ready_jobs", (("queue", "default"),))] == 11
    assert during[("fairq_queue_running_jobs", (("queue", "default"),))] == 2
    assert jobs_total(during) == {}

    for who in ("a", "b"):
        go(store.workdir, who)
    for job_id in [*blocking, *ids]:
        wait_state(store.app, job_id, JobState.SUCCEEDED)
    wait_state(store.app, bad, JobState.DEAD)

    ended = len(blocking) + len(ids)

    def all_counted() -> Samples | None:  # counted once each end is stored: just after
        samples = scrape(url)
        totals = jobs_total(samples)
        return samples if totals.get("dead") == 1 and totals.get("succeeded") == ended else None

    after = wait_for(all_counted, "every end in the counters")
    assert jobs_total(after) == {"succeeded": ended, "retrying": 1, "dead": 1}
    waits = after[("fairq_job_wait_seconds_count", (("queue", "default"),))]
    assert waits == ended + 2  # every lease taken: each job once, the failing one twice
    runs = {
        dict(labels)["job"]: value
        for (name, labels), value in after.items()
        if name == "fairq_job_run_seconds_count"
    }
    assert runs == {"block": 2, "record": len(ids), "explode": 2}
    ops = {
        dict(labels)["op"] for (name, labels) in after if name == "fairq_store_call_seconds_count"
    }
    assert "fail" in ops
    assert {"dequeue", "ack_and_dequeue", "ack_many"} & ops
    assert by_tenant(after, "fairq_tenant_ready_jobs") == {"other": 0}
    assert after[("fairq_queue_dead_jobs", (("queue", "default"),))] == 1

    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0


def test_metrics_and_several_processes_are_refused_with_the_fix(store: Store) -> None:
    worker = store.worker("--processes", "2", "--metrics-port", "0")
    assert worker.exit_code() == 2
    assert "run one `fairq worker` per process instead" in worker.log()
