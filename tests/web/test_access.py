"""Who may change what: the token, the CSRF checks, read-only dashboards, the bind rule."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from fairq.app import App
from fairq.contract import StatsParams
from fairq.job import JobState

from .conftest import TOKEN
from .helpers import ROOT, Dashboard, flood, make_dead
from .test_pages import sign_in

OpenDashboard = Callable[..., Dashboard]


def snapshot(app: App) -> list[object]:
    """What a change could touch (stats as stored: no decay between two reads)."""
    return [app.backend.stats(StatsParams()), app.dead(limit=1000)]


def post(url: str, fields: dict[str, str], headers: dict[str, str] | None = None) -> int:
    """A POST from outside the browser; its status code."""
    body = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_wrong_token_is_refused_and_changes_nothing(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    flood(app, greedy=100, small=1, per_small=2)
    board = open_dashboard(app.url, "--token", TOKEN)
    before = snapshot(app)
    sign_in(page, board, token="not-the-token-at-all")
    expect(page.locator("#message")).to_contain_text("wrong token")
    page.goto(board.base + "/queues/demo/tenant?id=greedy")
    expect(page.locator("#settings")).to_have_count(0)  # not signed in: no form
    expect(page.get_by_role("link", name="Sign in", exact=True)).to_be_visible()
    # a forged POST: no session, no CSRF field
    target = board.base + "/queues/demo/tenant?id=greedy"
    assert post(target, {"weight": "9", "action": "save"}) == 403
    assert post(target, {"weight": "9", "csrf": "guess"}, {"Cookie": "fairq_session=a.b"}) == 403
    assert snapshot(app) == before


def test_signed_in_post_without_csrf_or_from_another_site_is_refused(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    flood(app, greedy=100, small=1, per_small=2)
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.goto(board.base + "/queues/demo/tenant?id=greedy")
    expect(page.locator("#settings")).to_be_visible()
    before = snapshot(app)
    cookie = next(c for c in page.context.cookies() if c["name"] == "fairq_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    session = {"Cookie": f"fairq_session={cookie['value']}"}
    target = board.base + "/queues/demo/tenant?id=greedy"
    csrf = page.locator('#settings input[name="csrf"]').input_value()
    assert post(target, {"weight": "9"}, session) == 403  # no CSRF field
    assert (
        post(
            target, {"weight": "9", "csrf": csrf[:-1] + ("1" if csrf[-1] != "1" else "2")}, session
        )
        == 403
    )
    other_site = {**session, "Origin": "http://evil.example"}
    assert post(target, {"weight": "9", "csrf": csrf}, other_site) == 403
    assert snapshot(app) == before
    # the same request from the dashboard's own origin passes
    own = {**session, "Origin": board.base}
    assert post(target, {"weight": "9", "csrf": csrf}, own) == 200  # after the redirect
    (changed,) = app.backend.stats(StatsParams(queue="demo", tenant="greedy"))
    assert changed.weight == 9.0


def test_without_a_token_the_dashboard_is_read_only(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    flood(app, greedy=10, small=1, per_small=1)
    make_dead(app, "small-1")
    board = open_dashboard(app.url)
    before = snapshot(app)
    page.goto(board.base + "/dead")
    expect(page.locator("#dead-jobs tbody tr")).to_have_count(1)
    expect(page.locator("#requeue")).to_have_count(0)
    page.goto(board.base + "/login")
    page.locator('#login input[name="token"]').fill("anything-at-all-123")
    page.locator("#login button").click()
    expect(page.locator("#message")).to_contain_text("read-only")
    assert post(board.base + "/queues/demo/tenant?id=greedy", {"weight": "2"}) == 403
    assert post(board.base + "/dead/requeue", {"id": "x"}) == 403
    assert snapshot(app) == before


def test_bad_form_input_shows_a_message_and_changes_nothing(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    flood(app, greedy=100, small=1, per_small=2)
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.goto(board.base + "/queues/demo/tenant?id=small-1")
    before = snapshot(app)
    form = page.locator("#settings")
    form.locator('input[name="weight"]').fill("abc")
    form.locator('input[name="max_running"]').fill("-1")
    form.locator('input[name="rate"]').fill("fast")
    form.locator('button[value="save"]').click()
    message = page.locator("#message")
    expect(message).to_contain_text("Nothing was changed")
    expect(message).to_contain_text("weight: 'abc' is not a number")
    expect(message).to_contain_text("cap: '-1' is not a whole number")
    expect(message).to_contain_text("cannot read rate 'fast'")
    expect(form.locator('input[name="weight"]')).to_have_value("abc")  # kept for correcting
    assert snapshot(app) == before
    form.locator('input[name="weight"]').fill("1e9")
    form.locator('input[name="max_running"]').fill("")
    form.locator('input[name="rate"]').fill("")
    form.locator('button[value="save"]').click()
    expect(message).to_contain_text("weight must be 0 (paused), or from")
    assert snapshot(app) == before


def test_requeue_a_dead_job(page: Page, app: App, open_dashboard: OpenDashboard) -> None:
    flood(app, greedy=50, small=1, per_small=1)
    dead_id = make_dead(app, "small-1", error="ValueError: bad row 7")
    other = make_dead(app, "greedy")
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.goto(board.base + "/dead")
    line = page.locator(f'#dead-jobs tr[data-job="{dead_id}"]')
    expect(line).to_contain_text("ValueError: bad row 7")
    line.locator('input[type="checkbox"]').check()
    page.locator('#requeue button[type="submit"]').click()
    expect(page.locator("#message")).to_contain_text("Requeued 1 job")
    expect(page.locator(f'#dead-jobs tr[data-job="{dead_id}"]')).to_have_count(0)
    requeued = app.job_info(dead_id)
    assert requeued is not None and requeued.state is JobState.READY
    still = app.job_info(other)
    assert still is not None and still.state is JobState.DEAD


def test_bind_elsewhere_needs_a_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fairq.db'}"
    App(url).stats()  # the store exists

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fairq", "dashboard", "--url", url, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin"},
        )

    refused = run("--host", "0.0.0.0")
    assert refused.returncode == 2
    assert "refusing to serve the dashboard on '0.0.0.0' without an access token" in refused.stderr
    short = run("--token", "short")
    assert short.returncode == 2
    assert "use at least 16" in short.stderr


def test_a_foreign_host_name_is_refused_on_loopback(
    app: App, open_dashboard: OpenDashboard
) -> None:
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 must not read anything."""
    board = open_dashboard(app.url)
    request = urllib.request.Request(board.base + "/", headers={"Host": "evil.example"})
    try:
        urllib.request.urlopen(request, timeout=30)
        raise AssertionError("a foreign Host header was served")
    except urllib.error.HTTPError as exc:
        assert exc.code == 421


def test_the_command_takes_an_app(app: App, open_dashboard: OpenDashboard) -> None:
    """(A SQLite store not made yet: tests/web/test_first_start.py.)"""
    flood(app, greedy=3, small=1, per_small=1)
    board = open_dashboard(app.url, "fairq.demo.jobs:app")  # APP, rebound to --url
    with urllib.request.urlopen(board.base + "/queues/demo", timeout=30) as response:
        assert b'data-tenant="greedy"' in response.read()


def test_on_another_address_reading_needs_the_token_too(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    """Bound to all addresses (reached here through 127.0.0.1 only): every page asks to sign
    in, and /metrics takes the token as a bearer token (for a Prometheus scraper)."""
    flood(app, greedy=5, small=1, per_small=1)
    board = open_dashboard(app.url, "--host", "0.0.0.0", "--token", TOKEN)
    base = board.base.replace("0.0.0.0", "127.0.0.1")
    page.goto(base + "/queues/demo")
    expect(page).to_have_url(base + "/login?next=/queues/demo")
    expect(page.locator("#tenants")).to_have_count(0)
    sign_in(page, board=Dashboard(board.process, board.log_path, base))
    page.goto(base + "/queues/demo")
    expect(page.locator('#tenants tr[data-tenant="greedy"]')).to_have_count(1)
    request = urllib.request.Request(base + "/api/overview")
    try:
        urllib.request.urlopen(request, timeout=30)
        raise AssertionError("the API answered without the token")
    except urllib.error.HTTPError as exc:
        assert exc.code == 401
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with urllib.request.urlopen(urllib.request.Request(base + "/metrics", headers=bearer)) as r:
        assert b"fairq_queue_ready_jobs" in r.read()


def test_a_store_that_cannot_be_reached_is_a_clear_page(open_dashboard: OpenDashboard) -> None:
    board = open_dashboard("redis://127.0.0.1:1/0")  # nothing listens on port 1
    for path, kind in (("/", "text/html"), ("/api/overview", "application/json")):
        try:
            urllib.request.urlopen(board.base + path, timeout=60)
            raise AssertionError(f"{path} answered with no store")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
            assert exc.headers["content-type"].startswith(kind)
            assert "the store cannot be used right now" in exc.read().decode()
