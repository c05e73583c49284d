"""PrometheusMetrics' own counting: buckets as Prometheus reads them (``le``: at most the bound),
checked through prometheus_client's exposition and parser."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fairq import App, ConfigError
from fairq.cli.worker import DEFAULT_TOP_TENANTS
from fairq.contract import ExpiredLease
from fairq.instrument import JobEnd, Outcome, StoreCall
from fairq.instrument.metrics_http import asgi_app, metrics_registry, wsgi_app
from fairq.instrument.prometheus import PrometheusMetrics
from fairq.instrument.tenant_gauges import DEFAULT_TOP
from fairq.job import Lease, NewJob


def lease(name: str = "task", waited: float = 0.0) -> Lease:
    return Lease(
        token="tok", job_id="j", name=name, queue="default", tenant="t", payload="{}",
        attempt=1, max_attempts=3, started_at=100.0 + waited, deadline=160.0,
        lease_timeout=60.0, cost=1.0, ready_at=100.0,
    )  # fmt: skip


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = generate_latest(registry).decode()
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def test_histograms_count_a_value_on_a_bound_in_that_bucket() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry, run_buckets=[0.1, 1.0])
    for seconds in (0.05, 0.1, 0.5, 2.0):
        metrics.after_job(lease(), JobEnd(Outcome.SUCCEEDED, seconds))
    metrics.after_job(lease(), JobEnd(Outcome.HANDED_BACK, 5.0))  # cut short: not a run time
    metrics.after_job(lease(), JobEnd(Outcome.CANCELLED, 7.0, "stopped"))  # cut short too
    metrics.after_job(lease(), JobEnd(Outcome.DEAD, 0.0, "never ran"))
    buckets = samples(registry, "fairq_job_run_seconds_bucket")
    labels = (("job", "task"), ("queue", "default"))
    assert buckets == {
        (labels[0], ("le", "0.1"), labels[1]): 2,
        (labels[0], ("le", "1.0"), labels[1]): 3,
        (labels[0], ("le", "+Inf"), labels[1]): 4,
    }
    assert samples(registry, "fairq_job_run_seconds_sum") == {labels: pytest.approx(2.65)}
    assert samples(registry, "fairq_jobs_total") == {
        (("outcome", "succeeded"), ("queue", "default")): 4,
        (("outcome", "handed_back"), ("queue", "default")): 1,
        (("outcome", "cancelled"), ("queue", "default")): 1,
        (("outcome", "dead"), ("queue", "default")): 1,
    }


def test_waits_enqueues_and_store_calls_are_counted() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    metrics.after_dequeue([lease(waited=0.002), lease(waited=7.0)])
    job = NewJob(id="j", name="task", queue="default", tenant="t", payload="{}", run_at=0.0,
                 max_attempts=3, lease_timeout=60.0, cost=1.0)  # fmt: skip
    metrics.after_enqueue([job, job, job], ["default", "slow", "slow"], None)
    metrics.store_call(StoreCall("fail", 0.002, ConnectionError("down")))
    wait = samples(registry, "fairq_job_wait_seconds_bucket")
    assert wait[(("le", "0.005"), ("queue", "default"))] == 1
    assert wait[(("le", "10.0"), ("queue", "default"))] == 2
    assert samples(registry, "fairq_enqueued_total") == {
        (("queue", "default"),): 1, (("queue", "slow"),): 2,
    }  # fmt: skip
    assert samples(registry, "fairq_store_errors_total") == {(("op", "fail"),): 1}
    assert samples(registry, "fairq_store_call_seconds_count") == {(("op", "fail"),): 1}


def test_a_lapsed_relay_hold_is_not_counted_as_a_worker_s_expired_lease() -> None:
    """A relayed job no worker claimed never ran: its lapse is a lost message or relay, and
    counting it with the expiries would page an operator about dying workers."""
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    expired = ExpiredLease(job_id="j", name="task", queue="default", tenant="t", attempt=1,
                           deadline=160.0, dead=False)  # fmt: skip
    metrics.lease_expired(expired)
    metrics.lease_expired(replace(expired, claimed=False))
    metrics.lease_expired(replace(expired, claimed=False, queue="slow"))
    assert samples(registry, "fairq_lease_expiries_total") == {
        (("dead", "false"), ("queue", "default")): 1,
    }  # fmt: skip
    assert samples(registry, "fairq_relay_holds_lapsed_total") == {
        (("queue", "default"),): 1, (("queue", "slow"),): 1,
    }  # fmt: skip


def test_bad_buckets_and_a_second_plug_in_on_one_registry_are_refused() -> None:
    with pytest.raises(ConfigError, match="increasing finite bucket bounds"):
        PrometheusMetrics(CollectorRegistry(), run_buckets=[1.0, 0.5])
    registry = CollectorRegistry()
    PrometheusMetrics(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        PrometheusMetrics(registry)


def test_the_worker_commands_default_is_the_gauges_default() -> None:
    assert DEFAULT_TOP_TENANTS == DEFAULT_TOP


def test_one_registry_per_app_served_over_wsgi_and_asgi(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'q.db'}")
    app.job(name="task", tenant="who")(lambda who: None)
    app.enqueue("task", ["acme"])
    registry = metrics_registry(app, top=5)
    assert metrics_registry(app, top=5) is registry  # the gauges are registered once
    with pytest.raises(ConfigError, match="give every caller the same settings"):
        metrics_registry(app, top=7)  # not silently the first caller's gauges
    assert [type(m).__name__ for m in app.middleware] == ["JobLog", "PrometheusMetrics"]

    def wsgi_body() -> str:
        statuses: list[str] = []
        body = wsgi_app(registry)(
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""},
            lambda status, headers: statuses.append(status),
        )
        assert statuses == ["200 OK"]
        return b"".join(body).decode()

    async def asgi_body() -> str:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/metrics", "query_string": b"",
                 "headers": []}  # fmt: skip
        await asgi_app(registry)(scope, receive, send)
        assert sent[0]["status"] == 200
        return b"".join(m.get("body", b"") for m in sent[1:]).decode()

    for text in (wsgi_body(), asyncio.run(asgi_body())):
        found = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert found[("fairq_tenant_ready_jobs", (("queue", "default"), ("tenant", "acme")))] == 1
    app.close()
