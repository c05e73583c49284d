"""The store's gauges at scrape time: queue totals, the top N tenants, the rest as ``other``;
read from a real SQLite store and parsed with prometheus_client's own parser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fairq import App, ConfigError
from fairq.contract import DequeueParams
from fairq.instrument.tenant_gauges import TenantGauges


def scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample: (name, sorted labels) -> value."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def tenant(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, who: str,
           queue: str = "default") -> float | None:  # fmt: skip
    return samples.get((name, (("queue", queue), ("tenant", who))))


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    made = App(f"sqlite:///{tmp_path / 'q.db'}", clock=lambda: 1000.0)

    @made.job(name="task", tenant="who")
    def task(who: str) -> None: ...

    yield made
    made.close()


def fill(app: App, ready: dict[str, int], queue: str = "default") -> None:
    for who, count in ready.items():
        for _ in range(count):
            app.enqueue("task", [who], queue=queue)


def test_the_top_tenants_by_backlog_have_their_own_series_the_rest_sum_as_other(app: App) -> None:
    fill(app, {"big": 6, "mid": 4, "small": 1, "tiny": 1, "other": 2})
    fill(app, {"big": 3}, queue="reports")
    leased = app.backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=1000.0, limit=2)
    ).leases  # one running job each for the two tenants first in line
    running_tenants = sorted(lease.tenant for lease in leased)
    registry = CollectorRegistry()
    registry.register(TenantGauges(lambda: app.backend, top=2, clock=lambda: 1030.0))
    found = scrape(registry)

    assert found[("fairq_store_up", ())] == 1
    queue = (("queue", "default"),)
    assert found[("fairq_queue_ready_jobs", queue)] == 14 - 2
    assert found[("fairq_queue_running_jobs", queue)] == 2
    assert found[("fairq_queue_active_tenants", queue)] == 5
    assert found[("fairq_queue_oldest_ready_seconds", queue)] == 30.0
    assert running_tenants == ["big", "mid"]  # the fair order: the oldest job of each
    ready = {who: tenant(found, "fairq_tenant_ready_jobs", who) for who in
             ("big", "mid", "small", "tiny", "other")}  # fmt: skip
    running = {who: tenant(found, "fairq_tenant_running_jobs", who) for who in ready}
    assert ready == {"big": 5, "mid": 3, "small": None, "tiny": None, "other": 4}
    assert running == {"big": 1, "mid": 1, "small": None, "tiny": None, "other": 0}
    # other: small, tiny and the tenant actually named "other" (its own series would clash)
    # every queue gets its own top N
    assert tenant(found, "fairq_tenant_ready_jobs", "big", queue="reports") == 3
    assert tenant(found, "fairq_tenant_ready_jobs", "other", queue="reports") == 0


def test_tenant_series_stay_bounded_with_many_tenants(app: App) -> None:
    fill(app, {f"t{i:03}": 1 + (i % 3) for i in range(300)})
    registry = CollectorRegistry()
    registry.register(TenantGauges(lambda: app.backend, top=5, queues=["default"]))
    found = scrape(registry)
    tenants = {dict(labels)["tenant"] for name, labels in found
               if name == "fairq_tenant_ready_jobs"}  # fmt: skip
    assert len(tenants) == 6 and "other" in tenants
    total = sum(v for (name, _), v in found.items() if name == "fairq_tenant_ready_jobs")
    assert (
        total
        == found[("fairq_queue_ready_jobs", (("queue", "default"),))]
        == sum(1 + (i % 3) for i in range(300))
    )
    own = sorted(tenants - {"other"})
    assert own == ["t002", "t005", "t008", "t011", "t014"]  # 3 ready each, then by name


def test_ranked_by_wait_the_oldest_ready_job_wins(tmp_path: Path) -> None:
    now = [1000.0]
    app = App(f"sqlite:///{tmp_path / 'q.db'}", clock=lambda: now[0])
    app.job(name="task", tenant="who")(lambda who: None)
    fill(app, {"early": 1})
    now[0] = 2000.0
    fill(app, {"late": 5})
    registry = CollectorRegistry()
    registry.register(TenantGauges(lambda: app.backend, top=1, rank="wait", clock=lambda: 2100.0))
    found = scrape(registry)
    assert tenant(found, "fairq_tenant_ready_jobs", "early") == 1
    assert tenant(found, "fairq_tenant_oldest_ready_seconds", "early") == 1100.0
    assert tenant(found, "fairq_tenant_ready_jobs", "late") is None
    assert tenant(found, "fairq_tenant_ready_jobs", "other") == 5
    assert tenant(found, "fairq_tenant_oldest_ready_seconds", "other") == 100.0
    app.close()


def test_a_store_that_cannot_be_read_makes_store_up_zero(tmp_path: Path) -> None:
    def unreachable() -> App:
        raise ConnectionError("store down")

    registry = CollectorRegistry()
    registry.register(TenantGauges(lambda: unreachable().backend))
    assert scrape(registry) == {("fairq_store_up", ()): 0.0}


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="top must be a whole number"):
        TenantGauges(lambda: App("memory://").backend, top=-1)
    with pytest.raises(ConfigError, match="rank must be one of ready, wait"):
        TenantGauges(lambda: App("memory://").backend, rank="size")
