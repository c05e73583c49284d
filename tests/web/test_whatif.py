"""The tenant page's "What if?": the queue's last hour, run by a real worker, replayed with the
settings typed in the form, shown beside the real waits, and nothing saved."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from fairq.app import App
from fairq.contract import StatsParams

from .conftest import TOKEN
from .helpers import Dashboard, flood, start_worker, wait_for
from .test_access import post, snapshot
from .test_pages import sign_in, weight_of

OpenDashboard = Callable[..., Dashboard]


def drained(app: App) -> bool:
    return all(s.ready == s.running == 0 for s in app.backend.stats(StatsParams(queue="demo")))


def test_what_if_replays_the_last_hour_and_saves_nothing(
    page: Page, app: App, open_dashboard: OpenDashboard, tmp_path: Path
) -> None:
    flood(app, greedy=300, small=2, per_small=5, seconds=0.002)
    worker = start_worker(app.url, tmp_path, "--concurrency", "2")
    try:
        wait_for(lambda: drained(app), "the worker to run the flood", timeout=120)
    finally:
        worker.stop()
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.goto(board.base + "/queues/demo/tenant?id=small-1")
    before = snapshot(app)
    form = page.locator("#settings")
    form.locator('input[name="weight"]').fill("3")
    form.locator('input[name="max_running"]').fill("1")
    form.locator('button[value="whatif"]').click()

    table = page.locator("#whatif")
    expect(table.locator("tbody tr")).to_have_count(3)
    for run in ("actual", "replayed as is", "what if"):
        expect(table.locator(f'tr[data-run="{run}"] [data-field="p99"]')).not_to_have_text("—")
    expect(page.locator("h2", has_text="What if: weight=3.0, max_running=1")).to_be_visible()
    expect(page.locator("#whatif-note")).to_contain_text("310 jobs")
    expect(page.locator("#whatif-note")).to_contain_text("Nothing was saved")
    assert snapshot(app) == before
    assert weight_of(app, "small-1") == 1.0


def test_what_if_refuses_bad_values_and_strangers(
    page: Page, app: App, open_dashboard: OpenDashboard, tmp_path: Path
) -> None:
    flood(app, greedy=20, small=1, per_small=2, seconds=0.0)
    worker = start_worker(app.url, tmp_path)
    try:
        wait_for(lambda: drained(app), "the worker to run the flood", timeout=120)
    finally:
        worker.stop()
    board = open_dashboard(app.url, "--token", TOKEN)
    target = board.base + "/queues/demo/tenant/whatif?id=small-1"
    assert post(target, {"weight": "3"}) == 403  # not signed in
    sign_in(page, board)
    page.goto(board.base + "/queues/demo/tenant?id=small-1")
    form = page.locator("#settings")
    form.locator('input[name="weight"]').fill("0")
    form.locator('button[value="whatif"]').click()
    expect(page.locator("#message")).to_contain_text("a replay of it would never end")
    expect(page.locator("#whatif")).to_have_count(0)
    form.locator('input[name="weight"]').fill("-2")
    form.locator('button[value="whatif"]').click()
    expect(page.locator("#message")).to_contain_text("Nothing was changed")
    assert weight_of(app, "small-1") == 1.0
