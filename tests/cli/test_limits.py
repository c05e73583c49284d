"""Issue 5 on the command line: rates, pauses and history settings; status and share in stats.

Each scenario runs on a SQLite file and on memory:// (the commands then get an App sharing the
test's reference model, as ``--app`` would give them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_store import Store

import fairq.cli.admin.stats
import fairq.cli.admin.tenants
from fairq.app import App
from fairq.contract import DequeueParams, GetQueueParams
from fairq.demo.jobs import make_app
from fairq.policy.rate import Rate


@pytest.fixture(params=["sqlite", "memory"])
def any_store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Store]:
    if request.param == "sqlite":
        yield request.getfixturevalue("store")
        return
    app = make_app("memory://")
    app.publish()
    shared = app.backend

    def open_app(url: str | None, app_ref: str | None, *, existing: bool = False) -> App:
        return App("memory://", backend=shared)

    for module in (fairq.cli.admin.stats, fairq.cli.admin.tenants):
        monkeypatch.setattr(module, "open_app", open_app)
    yield Store(url="memory://", app=app)


def _tenant(store: Store, tenant: str = "acme") -> Any:
    (row,) = store.app.stats(queue="demo", tenant=tenant)
    return row


def test_tenant_rate_with_burst_then_back_to_the_queue_default(any_store: Store) -> None:
    store = any_store
    store.enqueue("acme")
    result = store.run("tenants", "demo", "acme", "--rate", "100/minute", "--burst", "5")
    assert result.exit_code == 0, result.output
    assert _tenant(store).rate == Rate(100, 60.0, 5)
    assert "100/60s (burst 5)" in result.stdout
    assert store.run("queue", "demo", "--rate", "10/s").exit_code == 0
    assert store.run("tenants", "demo", "acme", "--rate", "none").exit_code == 0
    assert _tenant(store).rate == Rate(10, 1.0)  # the queue's default again


def test_weight_0_pauses_and_shows_as_paused(any_store: Store) -> None:
    store = any_store
    store.enqueue("acme")
    result = store.run("tenants", "demo", "acme", "--weight", "0")
    assert result.exit_code == 0, result.output
    assert _tenant(store).weight == 0
    assert "0 (paused)" in result.stdout
    assert "paused (weight 0)" in store.run("stats").stdout


def test_queue_rate_and_history_keep_what_is_not_given(any_store: Store) -> None:
    store = any_store
    store.enqueue("acme")
    assert store.run("queue", "demo", "--max-running", "3", "--weight", "2").exit_code == 0
    result = store.run("queue", "demo", "--rate", "5/s", "--burst", "2", "--half-life", "600")
    assert result.exit_code == 0, result.output
    settings = store.app.backend.get_queue(GetQueueParams(queue="demo"))
    assert (settings.weight, settings.max_running) == (2.0, 3)
    assert (settings.rate, settings.half_life, settings.max_debt) == (Rate(5, 1.0, 2), 600, 60)
    assert store.run("queue", "demo", "--max-debt", "30").exit_code == 0
    settings = store.app.backend.get_queue(GetQueueParams(queue="demo"))
    assert (settings.rate, settings.half_life, settings.max_debt) == (Rate(5, 1.0, 2), 600, 30)
    shown = store.run("queue", "demo", "--half-life", "none", "--rate", "none").stdout
    assert "default rate none, half-life none, max debt 30 s" in shown
    assert store.app.backend.get_queue(GetQueueParams(queue="demo")).max_running == 3


def test_queue_max_in_flight_is_set_kept_shown_and_removed(any_store: Store) -> None:
    store = any_store
    app = store.app
    store.enqueue("acme", n=3)
    store.enqueue("globex", n=3)
    result = store.run("queue", "demo", "--max-in-flight", "2")
    assert result.exit_code == 0, result.output
    assert "max in flight 2" in result.stdout
    assert store.run("queue", "demo", "--weight", "3").exit_code == 0
    settings = app.backend.get_queue(GetQueueParams(queue="demo"))
    assert (settings.weight, settings.max_in_flight) == (3.0, 2)
    app.backend.dequeue(DequeueParams(queues=["demo"], worker_id="w", now=app.clock(), limit=5))
    assert "in flight 2 of max 2" in store.run("stats").stdout
    doc = json.loads(store.run("stats", "--tenant", "acme", "--json").stdout)
    assert (doc["queues"][0]["max_in_flight"], doc["queues"][0]["in_flight"]) == (2, 2)
    assert store.run("queue", "demo", "--max-in-flight", "none").exit_code == 0
    assert app.backend.get_queue(GetQueueParams(queue="demo")).max_in_flight is None
    assert "in flight 2 of max none" in store.run("stats").stdout


@pytest.mark.parametrize(
    "args",
    [
        ["tenants", "demo", "acme", "--rate", rate]
        for rate in ["100", "100/fortnight", "abc", "0/minute", "-1/s", "1/0s", "", "1/40d"]
    ]
    + [
        ["tenants", "demo", "acme", "--rate", "100/minute", "--burst", "0"],
        ["tenants", "demo", "acme", "--rate", "100/minute", "--burst", "-1"],
        ["tenants", "demo", "acme", "--burst", "3"],  # a burst without a rate
        ["tenants", "demo", "acme", "--rate", "none", "--burst", "3"],
        ["tenants", "demo", "acme", "--reset", "--rate", "1/s"],
        ["tenants", "demo", "acme", "--weight", "-1"],
        ["tenants", "demo", "acme", "--weight", "nan"],
        ["queue", "demo", "--weight", "0"],
        ["queue", "demo", "--rate", "100/fortnight"],
        ["queue", "demo", "--rate", "5/s", "--burst", "0"],
        ["queue", "demo", "--half-life", "-1"],
        ["queue", "demo", "--half-life", "0"],
        ["queue", "demo", "--half-life", "nan"],
        ["queue", "demo", "--half-life", "soon"],
        ["queue", "demo", "--max-debt", "-5"],
        ["queue", "demo", "--max-debt", "inf"],
        ["queue", "demo", "--max-in-flight", "0"],
        ["queue", "demo", "--max-in-flight", "-1"],
        ["queue", "demo", "--max-in-flight", "2.5"],
        ["queue", "demo", "--max-in-flight", "99999999999"],
    ],
)
def test_bad_limits_exit_2_and_change_nothing(any_store: Store, args: list[str]) -> None:
    store = any_store
    store.enqueue("acme")
    store.app.set_tenant("demo", "acme", weight=2, rate="1/s")
    store.app.set_queue("demo", rate="9/minute", half_life=60.0)
    before = (store.snapshot(), store.app.backend.get_queue(GetQueueParams(queue="demo")))
    result = store.run(*args)
    assert result.exit_code == 2, result.output
    assert "Error" in result.output and "Traceback" not in result.output
    assert (store.snapshot(), store.app.backend.get_queue(GetQueueParams(queue="demo"))) == before


def test_stats_shows_status_and_share_in_the_table_and_in_json(any_store: Store) -> None:
    store = any_store
    app = store.app
    app.set_tenant("demo", "capped", max_running=1)
    app.set_tenant("demo", "limited", rate="1/hour")
    app.set_tenant("demo", "paused", weight=0)
    for tenant in ("capped", "limited", "paused"):
        store.enqueue(tenant, n=2)
    app.backend.dequeue(DequeueParams(queues=["demo"], worker_id="w", now=app.clock(), limit=5))
    store.enqueue("waiting")
    table = store.run("stats")
    assert table.exit_code == 0, table.output
    for text in ("status", "share", "capped (1/1 running)", "paused (weight 0)"):
        assert text in table.stdout
    assert "waiting its turn" in table.stdout
    assert "rate-limited (eligible again at" in table.stdout
    assert re.search(r", in 3[56]\d\d\.\ds\)", table.stdout)  # an hour less the test's own time
    doc = json.loads(store.run("stats", "--json").stdout)
    rows = {t["tenant"]: t for t in doc["queues"][0]["tenants"]}
    assert rows["capped"]["status"] == "capped"
    assert rows["capped"]["reason"] == "capped (1/1 running)"
    assert rows["paused"]["status"] == "paused"
    assert rows["waiting"]["status"] == "waiting its turn"
    limited = rows["limited"]
    assert limited["status"] == "rate-limited"
    assert limited["rate"] == "1/3600s"
    assert 3590 < limited["limited_in"] <= 3600
    assert limited["limited_until_utc"].endswith("UTC")
    assert rows["capped"]["share"] == pytest.approx(0.5)
    assert rows["limited"]["share"] == pytest.approx(0.5)
    assert rows["paused"]["share"] == 0.0
    assert rows["paused"]["throttle"] is None
