"""A real worker drains a flood while the dashboard watches: the live chart, the overview's
throughput, the store's recent figures (waits, starts per minute, next start), and /metrics
(parsed with prometheus_client's own parser)."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect
from prometheus_client.parser import text_string_to_metric_families

from fairq.app import App

from .helpers import Dashboard, Process, flood, start_worker

OpenDashboard = Callable[..., Dashboard]
RATE = re.compile(r"^greedy (\d+(?:\.\d+)?)/s$")


def test_live_chart_during_a_flood(
    page: Page, app: App, open_dashboard: OpenDashboard, tmp_path: Path
) -> None:
    flood(app, greedy=20_000, small=0, per_small=0, seconds=0.005)
    board = open_dashboard(app.url)
    worker: Process = start_worker(app.url, tmp_path, "--concurrency", "4")
    try:
        page.goto(board.base + "/queues/demo")
        greedy = page.locator('#legend li[data-tenant="greedy"]')
        page.wait_for_function(
            """() => { const li = document.querySelector('#legend li[data-tenant="greedy"]');
                       return li && parseFloat(li.textContent.split(" ").pop()) > 0; }"""
        )
        found = RATE.match(greedy.inner_text().strip())
        assert found is not None and float(found.group(1)) > 0
        # a small tenant arrives mid-flood and gets its line in the chart
        app.enqueue_many(app.jobs["fairq.demo.work"].call("small-1", 0.005) for _ in range(2000))
        expect(page.locator('#legend li[data-tenant="small-1"]')).to_be_visible()
        page.goto(board.base + "/")
        throughput = page.locator('#queues tr[data-queue="demo"] [data-field="throughput"]')
        expect(throughput).to_have_text(re.compile(r"^\d+(\.\d+)?/s$"))
        # the store's recent figures: greedy's waits, its starts per minute, its next start
        page.goto(board.base + "/queues/demo?sort=tenant&dir=asc")
        greedy = page.locator('#tenants tr[data-tenant="greedy"]')
        expect(greedy.locator('[data-field="wait_p50"]')).to_have_text(re.compile(r"\d"))
        expect(greedy.locator('[data-field="wait_p99"]')).to_have_text(re.compile(r"\d"))
        per_minute = greedy.locator('[data-field="jobs_per_minute"]').inner_text()
        assert float(per_minute.replace(",", "")) > 0
        expect(greedy.locator('[data-field="eta"]')).to_have_text(re.compile(r"^~"))
        with urllib.request.urlopen(board.base + "/metrics", timeout=30) as response:
            text = response.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        ready = families["fairq_tenant_ready_jobs"]
        tenants = {s.labels["tenant"] for s in ready.samples if s.labels["queue"] == "demo"}
        assert "greedy" in tenants
    finally:
        worker.stop()
