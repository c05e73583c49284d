"""The dashboard in a real browser against a real store with a flood under way."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from fairq.app import App
from fairq.contract import StatsParams

from .conftest import TOKEN
from .helpers import Dashboard, flood, lease

OpenDashboard = Callable[..., Dashboard]


def every_status(app: App) -> None:
    """A flood in queue "demo" with one tenant in each state (no worker: nothing moves).

    Each lease takes the only tenant eligible at that moment, so the states are certain.
    """
    job = app.jobs["fairq.demo.work"]
    app.enqueue_many(job.call("capped", 0.0) for _ in range(3))
    assert lease(app, "demo") == "capped"
    app.set_tenant("demo", "capped", max_running=1)
    app.set_tenant("demo", "limited", rate="1/hour")
    app.enqueue_many(job.call("limited", 0.0) for _ in range(3))
    assert lease(app, "demo") == "limited"
    job.enqueue("runner", 0.0)
    assert lease(app, "demo") == "runner"
    flood(app, greedy=2000, small=4, per_small=5)
    app.set_tenant("demo", "small-1", weight=0)


def row(page: Page, tenant: str):  # type: ignore[no-untyped-def]
    return page.locator(f'#tenants tr[data-tenant="{tenant}"]')


def test_tenant_rows_show_each_status_and_why(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    every_status(app)
    board = open_dashboard(app.url)
    page.goto(board.base + "/")
    queue_row = page.locator('#queues tr[data-queue="demo"]')
    expect(queue_row.locator('[data-field="ready"]')).to_have_text("2,024")
    queue_row.locator("a", has_text="demo").click()
    expect(page.locator("h1")).to_have_text("Queue demo")
    expect(row(page, "greedy").locator('[data-field="ready"]')).to_have_text("2,000")
    expect(row(page, "greedy").locator('[data-field="status"]')).to_have_text("waiting its turn")
    expect(row(page, "capped").locator('[data-field="status"]')).to_have_text(
        "capped (1/1 running)"
    )
    expect(row(page, "limited").locator('[data-field="status"]')).to_contain_text(
        "rate-limited (eligible again at"
    )
    expect(row(page, "runner").locator('[data-field="status"]')).to_have_text("running")
    expect(row(page, "small-1").locator('[data-field="status"]')).to_have_text("paused (weight 0)")
    expect(row(page, "small-2").locator('[data-field="status"]')).to_have_text("waiting its turn")
    # read-only: no change form, and the page says how to allow changes
    expect(page.locator("#read-only")).to_be_visible()
    row(page, "greedy").locator("a").click()
    expect(page.locator("#tenant-id")).to_have_text("greedy")
    expect(page.locator("#settings")).to_have_count(0)


def test_status_filter_and_sort(page: Page, app: App, open_dashboard: OpenDashboard) -> None:
    every_status(app)
    board = open_dashboard(app.url)
    page.goto(board.base + "/queues/demo")
    page.locator('#search select[name="status"]').select_option("capped")
    page.locator("#search button").click()
    expect(page.locator("#tenants tbody tr")).to_have_count(1)
    expect(page.locator("#tenants tbody tr")).to_have_attribute("data-tenant", "capped")
    page.goto(board.base + "/queues/demo")
    page.locator('#tenants th a[data-sort="tenant"]').click()  # ascending by id
    first = page.locator("#tenants tbody tr").first
    expect(first).to_have_attribute("data-tenant", "capped")
    page.locator('#tenants th a[data-sort="tenant"]').click()  # again: descending
    expect(first).to_have_attribute("data-tenant", "small-4")


def sign_in(page: Page, board: Dashboard, token: str = TOKEN) -> None:
    page.goto(board.base + "/login")
    page.locator('#login input[name="token"]').fill(token)
    page.locator("#login button").click()


def weight_of(app: App, tenant: str) -> float:
    (found,) = app.backend.stats(StatsParams(queue="demo", tenant=tenant))
    return found.weight


def test_change_weight_and_pause_through_the_page(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    flood(app, greedy=500, small=2, per_small=3)
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.goto(board.base + "/queues/demo")
    row(page, "small-1").locator("a").click()
    form = page.locator("#settings")
    form.locator('input[name="weight"]').fill("3")
    form.locator('button[value="save"]').click()
    expect(page.locator("#message")).to_contain_text("Saved")
    expect(page.locator('#facts [data-field="weight"]')).to_have_text("3")
    assert weight_of(app, "small-1") == 3.0
    page.locator('#settings button[value="pause"]').click()
    expect(page.locator("#status")).to_have_text("paused (weight 0)")
    assert weight_of(app, "small-1") == 0.0
    page.locator('#settings button[value="resume"]').click()
    expect(page.locator("#message")).to_contain_text("Resumed")
    assert weight_of(app, "small-1") == 1.0
    # a cap and a rate, then back to the queue's defaults
    form.locator('input[name="max_running"]').fill("2")
    form.locator('input[name="rate"]').fill("10/minute")
    form.locator('button[value="save"]').click()
    expect(page.locator('#facts [data-field="cap"]')).to_have_text("2")
    (stats,) = app.backend.stats(StatsParams(queue="demo", tenant="small-1"))
    assert stats.max_running == 2
    assert str(stats.rate) == "10/60s"
    page.locator('#settings button[value="reset"]').click()
    expect(page.locator('#facts [data-field="cap"]')).to_have_text("none")
    (stats,) = app.backend.stats(StatsParams(queue="demo", tenant="small-1"))
    assert (stats.max_running, stats.rate) == (None, None)


ODD = '<b>acme</b> & "co"/?id=x#1 {ü}'


def test_an_odd_tenant_id_shows_as_itself_and_can_be_changed(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    app.jobs["fairq.demo.work"].enqueue(ODD, 0.0)
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.goto(board.base + "/queues/demo")
    link = page.locator("#tenants tbody tr").first.locator("a")
    expect(link).to_have_text(ODD)  # text, not markup
    link.click()
    expect(page.locator("#tenant-id")).to_have_text(ODD)
    page.locator('#settings input[name="weight"]').fill("2.5")
    page.locator('#settings button[value="save"]').click()
    expect(page.locator("#message")).to_contain_text("Saved")
    assert weight_of(app, ODD) == 2.5
