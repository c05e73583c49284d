"""10,000 tenants on SQLite: the page holds one page of rows; search, sort and pages work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from fairq.demo.jobs import WORK, make_app

from .helpers import Dashboard

OpenDashboard = Callable[..., Dashboard]
TENANTS = 10_000


def test_ten_thousand_tenants(page: Page, tmp_path: Path, open_dashboard: OpenDashboard) -> None:
    url = f"sqlite:///{tmp_path / 'fairq.db'}"
    app = make_app(url)
    job = app.jobs[WORK]
    # tenant i has (i % 7) + 1 ready jobs, so "ready" sorts differently from the id
    app.enqueue_many(
        job.call(f"tenant-{i:05d}", 0.0) for i in range(TENANTS) for _ in range(i % 7 + 1)
    )
    app.close()
    board = open_dashboard(url)
    page.goto(board.base + "/queues/demo")
    rows = page.locator("#tenants tbody tr")
    expect(rows).to_have_count(50)
    expect(page.locator("#row-count")).to_have_text("Tenants 1–50 of 10,000")
    # default order: most ready first (7 each), ties by id
    expect(rows.first).to_have_attribute("data-tenant", "tenant-00006")
    expect(rows.first.locator('[data-field="ready"]')).to_have_text("7")
    page.locator('#tenants th a[data-sort="tenant"]').click()
    expect(rows.first).to_have_attribute("data-tenant", "tenant-00000")
    page.locator('#pages a[rel="next"]').click()
    expect(rows.first).to_have_attribute("data-tenant", "tenant-00050")
    expect(page.locator("#row-count")).to_have_text("Tenants 51–100 of 10,000")
    page.get_by_role("link", name="last »").click()
    expect(rows.last).to_have_attribute("data-tenant", "tenant-09999")
    page.locator('#search input[name="q"]').fill("TENANT-0999")
    page.locator("#search button").click()
    expect(rows).to_have_count(10)
    expect(page.locator("#row-count")).to_have_text("Tenants 1–10 of 10 (of 10,000 in the queue)")
