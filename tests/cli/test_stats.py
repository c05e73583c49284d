"""``fairq stats``: the same figures as a table and as JSON; tenant ids shown safely."""

from __future__ import annotations

import json

import pytest
from cli_store import Store

from fairq.contract import DequeueParams
from fairq.policy.histogram import BOUNDS, WINDOW


def test_table_shows_each_tenant_and_queue_totals(store: Store) -> None:
    store.enqueue("acme", n=3)
    store.enqueue("globex", n=2)
    store.app.backend.dequeue(
        DequeueParams(queues=["demo"], worker_id="w", now=store.app.clock(), limit=1)
    )
    result = store.run("stats")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "queue demo" in out
    assert "acme" in out and "globex" in out
    assert "2 tenants" in out  # footer
    assert "oldest ready" in out


def test_json_has_the_same_figures(store: Store) -> None:
    store.enqueue("acme", n=3)
    store.enqueue("globex", n=2, queue="other")
    store.app.set_tenant("demo", "acme", weight=2.5, max_running=4)
    result = store.run("stats", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    queues = {q["queue"]: q for q in doc["queues"]}
    assert set(queues) == {"demo", "other"}
    (acme,) = queues["demo"]["tenants"]
    assert acme["tenant"] == "acme"
    assert (acme["weight"], acme["max_running"], acme["ready"]) == (2.5, 4, 3)
    assert acme["oldest_ready_age"] >= 0
    assert queues["demo"]["totals"]["ready"] == 3
    assert queues["other"]["totals"] == {
        "ready": 2, "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0, "dead": 0,
        "cancelled": 0, "tenants": 1,
        "oldest_ready_age": queues["other"]["tenants"][0]["oldest_ready_age"],
    }  # fmt: skip


def test_queue_filter(store: Store) -> None:
    store.enqueue("acme")
    store.enqueue("globex", queue="other")
    doc = json.loads(store.run("stats", "--queue", "other", "--json").stdout)
    assert [q["queue"] for q in doc["queues"]] == ["other"]


def test_tenant_ids_print_literally_and_safely(store: Store) -> None:
    markup, escape, long_id = "[bold red]boom[/]", "\x1b[2Jwiped", "t" * 200
    for tenant in (markup, escape, long_id, "ünï cödé:{x} y"):
        store.enqueue(tenant)
    table = store.run("stats").stdout
    assert markup in table  # markup shown, not interpreted
    assert "\x1b" not in table  # no escape sequence reaches the terminal
    assert "\\x1b[2Jwiped" in table
    assert "t" * 39 + "…" in table and long_id not in table
    assert "ünï cödé:{x} y" in table
    tenants = {
        t["tenant"] for t in json.loads(store.run("stats", "--json").stdout)["queues"][0]["tenants"]
    }
    assert tenants == {markup, escape, long_id, "ünï cödé:{x} y"}  # exact in JSON


def test_empty_store(store: Store) -> None:
    result = store.run("stats")
    assert result.exit_code == 0
    assert "No queues yet" in result.stdout
    assert json.loads(store.run("stats", "--json").stdout)["queues"] == []


def test_recent_waits_throughput_and_an_estimated_next_start(store: Store) -> None:
    store.enqueue("acme", n=3)
    store.enqueue("globex", n=2)
    taken = store.app.backend.dequeue(
        DequeueParams(queues=["demo"], worker_id="w", now=store.app.clock(), limit=2)
    ).leases
    assert sorted(lease.tenant for lease in taken) == ["acme", "globex"]
    doc = json.loads(store.run("stats", "--json").stdout)
    rows = {t["tenant"]: t for t in doc["queues"][0]["tenants"]}
    for row in rows.values():
        assert row["wait_p50"] in BOUNDS and row["wait_p99"] in BOUNDS
        assert row["jobs_per_minute"] > 0 and 0 < row["figures_window"] <= WINDOW
        # one start each of the queue's two: a turn every two starts, at the queue's rate
        assert row["next_start_estimate"] == pytest.approx(2 / (2 * row["jobs_per_minute"] / 60))
    table = store.run("stats").stdout
    assert "recent demo" in table and "wait p99" in table and "next start (est.)" in table
