"""What a new user meets first (issue #31, item 6): the dashboard started in a fresh directory
before any worker, a job's whole traceback, and the icon every browser asks for."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from email.message import Message
from pathlib import Path

from playwright.sync_api import Page, expect

from fairq.app import App
from fairq.demo.jobs import WORK, make_app

from .conftest import TOKEN
from .helpers import ROOT, Dashboard, make_dead, start_dashboard

OpenDashboard = Callable[..., Dashboard]

PROJECT = """\
from fairq.demo.jobs import make_app

app = make_app("sqlite:///fairq.db")
"""


def get(url: str) -> tuple[int, Message, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def dashboard_options() -> set[str]:
    """The options ``fairq dashboard --help`` lists."""
    shown = subprocess.run(
        [sys.executable, "-m", "fairq", "dashboard", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z-]+)", shown, re.M))


def test_starts_in_a_fresh_directory_and_shows_the_store_once_a_worker_made_it(
    page: Page, tmp_path: Path, dashboards: list[Dashboard]
) -> None:
    project = tmp_path / "project"
    (project / "myproject").mkdir(parents=True)
    (project / "myproject" / "__init__.py").write_text("")
    (project / "myproject" / "jobs.py").write_text(PROJECT)
    board = start_dashboard(None, tmp_path, "myproject.jobs:app", cwd=project)
    dashboards.append(board)
    status, headers, body = get(board.base + "/")
    text = body.decode()
    assert status == 503 and headers["Retry-After"], text
    assert "no fairq store at sqlite:///fairq.db yet" in text
    status, _, body = get(board.base + "/metrics")  # it reads the store by another way
    assert status == 503 and b"no fairq store" in body
    assert not (project / "fairq.db").exists()  # the dashboard made no empty store
    # every option a hint names is one the dashboard has
    named = set(re.findall(r"(--[a-z][a-z-]+)", board.log() + text))
    assert named and named <= dashboard_options(), named - dashboard_options()

    page.goto(board.base + "/")
    expect(page.locator("#message")).to_contain_text("no fairq store at sqlite:///fairq.db yet")
    app = make_app(f"sqlite:///{project / 'fairq.db'}")  # what a worker's start makes
    try:
        app.jobs[WORK].enqueue("acme", 0.0)
        # the waiting page reloads by itself and shows the queue
        expect(page.locator('#queues tr[data-queue="demo"]')).to_be_visible()
    finally:
        app.close()


def test_a_job_page_shows_the_whole_traceback_folded(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    frames = "".join(
        f'  File "/srv/app/rows.py", line {n}, in step_{n}\n    value = parse(row[{n}])\n'
        for n in range(60)
    )
    traceback = f"Traceback (most recent call last):\n{frames}ValueError: bad row 7"
    error = f"ValueError: bad row 7\n\n{traceback}"
    assert len(error) > 4000
    dead_id = make_dead(app, "acme", error=error)
    board = open_dashboard(app.url)
    for target, cell in (
        (f"/jobs?id={dead_id}", '#job [data-field="last_error"]'),
        ("/dead", f'#dead-jobs tr[data-job="{dead_id}"] td.errortext'),
    ):
        page.goto(board.base + target)
        shown = page.locator(cell)
        expect(shown.locator("summary")).to_have_text("ValueError: bad row 7")
        expect(shown.locator("pre")).to_be_hidden()  # folded
        shown.locator("summary").click()
        expect(shown.locator("pre")).to_be_visible()
        assert shown.locator("pre").inner_text() == traceback  # whole, once
        assert shown.text_content() == "ValueError: bad row 7" + traceback


def test_favicon_is_served_on_every_kind_of_bind(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    # another address (reading needs the sign-in there): the icon is served before it
    public = open_dashboard(app.url, "--host", "0.0.0.0", "--token", TOKEN)
    board = open_dashboard(app.url)
    for base in (public.base.replace("0.0.0.0", "127.0.0.1"), board.base):
        status, headers, body = get(base + "/favicon.ico")
        assert status == 200
        assert headers["Content-Type"] == "image/x-icon"
        assert body[:4] == b"\x00\x00\x01\x00"  # an ICO file
    answers: list[tuple[str, int]] = []
    page.on("response", lambda response: answers.append((response.url, response.status)))
    page.goto(board.base + "/")
    expect(page.locator("h1")).to_have_text("Queues")
    assert page.locator('link[rel="icon"]').get_attribute("href") == "/favicon.ico"
    assert all(code < 400 for _, code in answers), answers
