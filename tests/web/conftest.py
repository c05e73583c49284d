"""Fixtures for the dashboard tests: Debian's Chromium driven by Playwright, and stores.

Chromium must be installed (``apt-get install chromium``; .ci/run does it): a missing browser
FAILS these tests, it never skips them. Stores: a SQLite file, and Redis (``$FAIRQ_TEST_REDIS_URL``,
default database 9, emptied before and after each test; unreachable fails).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from fairq.app import App
from fairq.demo.jobs import make_app

from .helpers import CHROMIUM, Dashboard, start_dashboard

TOKEN = "test-token-0123456789abcdef"
REDIS_DEFAULT = "redis://127.0.0.1:6379/9"


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    """One driver and browser while a test process runs the tests of tests/web in a row, each
    test in a fresh context (``page``); not per session: Playwright's sync API keeps an event
    loop running in this thread until it stops, and the tests after these (asyncio.run) need
    none running. pytest ends a package's fixtures before a test from outside it."""
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the dashboard is tested in a real browser; install it with "
            "`apt-get install -y chromium` (.ci/run does)"
        )
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
    yield launched
    launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    opened = context.new_page()
    opened.set_default_timeout(30_000)
    yield opened
    context.close()


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fairq.db'}"
        return
    import redis

    base = os.environ.get("FAIRQ_TEST_REDIS_URL", REDIS_DEFAULT)
    client = redis.Redis.from_url(base)
    client.flushdb()
    yield f"{base}?prefix=t{uuid.uuid4().hex[:8]}"
    client.flushdb()
    client.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fairq.db'}"


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    made = make_app(store_url)
    made.publish()
    yield made
    made.close()


@pytest.fixture
def dashboards(tmp_path: Path) -> Iterator[list[Dashboard]]:
    """Dashboards a test starts; all are stopped at its end."""
    started: list[Dashboard] = []
    yield started
    for board in started:
        board.stop()


@pytest.fixture
def open_dashboard(dashboards: list[Dashboard], tmp_path: Path) -> Callable[..., Dashboard]:
    """``open_dashboard(url, *args)``: a ``fairq dashboard`` process, stopped at the end."""

    def open_(url: str, *extra: str) -> Dashboard:
        board = start_dashboard(url, tmp_path, *extra)
        dashboards.append(board)
        return board

    return open_
