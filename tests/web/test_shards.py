"""A sharded queue on the dashboard: each shard (``imports@3``) is a queue of its own, listed on
the overview and linked to its tenant table and tenant pages like any other."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from playwright.sync_api import Page, expect

from fairq.app import App
from fairq.policy.shards import tenant_shards

from .helpers import Dashboard

OpenDashboard = Callable[..., Dashboard]


def test_each_shard_is_a_queue_with_its_tenants(
    page: Page, store_url: str, open_dashboard: OpenDashboard
) -> None:
    app = App(store_url)
    app.queue("imports", shards=8, shard_size=2)
    work = app.job(name="work", queue="imports", tenant="tenant")(lambda tenant, n: None)
    for n in range(4):
        work.enqueue("acme", n)
    app.close()
    first, second = (f"imports@{i}" for i in tenant_shards("imports", "acme", 8, 2))
    board = open_dashboard(store_url)
    page.goto(board.base + "/")
    for shard in (first, second):
        row = page.locator(f'#queues tr[data-queue="{shard}"]')
        expect(row.locator('[data-field="ready"]')).to_have_text("2")
    page.locator(f'#queues tr[data-queue="{first}"]').locator("a", has_text=first).click()
    expect(page.locator("h1")).to_have_text(f"Queue {first}")
    tenant = page.locator('#tenants tr[data-tenant="acme"]')
    expect(tenant.locator('[data-field="ready"]')).to_have_text("2")
    tenant.locator("a").click()
    expect(page.locator("#tenant-id")).to_have_text("acme")
    page.goto(board.base + "/queues/" + quote(second, safe=""))  # '@' escaped: the same page
    expect(page.locator("h1")).to_have_text(f"Queue {second}")
