"""Throttle rules at the App: only a job headed for its declared queue is re-routed (an explicit
queue is never overridden, and is not counted); a job without a tenant of its own passes through
with a warning. The store never sees rules for those jobs, so the App is where this is decided.

(Its own module beside tests/test_app.py, on ``memory://`` and SQLite like it.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairq import App
from fairq.app import JobDefinition
from fairq.contract import ThrottleWindowsParams
from fairq.errors import ConfigError
from fairq.policy.throttle import Throttle

HOUR = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite"])
def app(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[App]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/a.db"
    app = App(url, clock=clock, fallback_tenant="shared")
    app.queue("slow", weight=1)
    yield app
    app.close()


def declare(app: App) -> JobDefinition[..., None]:
    @app.job(name="sync", tenant="account", throttle=[Throttle(1, HOUR, "slow")])
    def sync(account: str | None = None) -> None:
        return None

    return sync


def queue_of(app: App, job_id: str) -> str:
    info = app.job_info(job_id)
    assert info is not None
    return info.queue


def test_jobs_headed_for_their_declared_queue_are_rerouted(app: App) -> None:
    sync = declare(app)
    ids = [sync.enqueue("acme") for _ in range(3)]
    assert [queue_of(app, i) for i in ids] == ["default", "slow", "slow"]
    assert queue_of(app, app.enqueue("sync", ["globex"])) == "default"


def test_an_explicit_queue_is_never_overridden_nor_counted(app: App, clock: Clock) -> None:
    sync = declare(app)
    first = sync.enqueue("acme")
    explicit = [sync.options(queue="default").enqueue("acme") for _ in range(3)]
    assert [queue_of(app, i) for i in [first, *explicit]] == ["default"] * 4
    params = ThrottleWindowsParams(keys=[("sync", "acme")], now=clock.now)
    assert app.backend.throttle_windows(params) == {("sync", "acme"): [clock.now]}
    assert queue_of(app, sync.enqueue("acme")) == "slow"


def test_a_job_without_a_tenant_passes_through_with_a_warning(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    sync = declare(app)
    with caplog.at_level(logging.WARNING, logger="fairq"):
        ids = [sync.enqueue() for _ in range(3)]
    assert [queue_of(app, i) for i in ids] == ["default"] * 3
    assert "throttle" in caplog.text


def test_rules_for_the_jobs_own_or_an_undeclared_queue_are_refused(app: App) -> None:
    with pytest.raises(ConfigError, match="own queue"):
        app.job(name="a", throttle=[Throttle(1, HOUR, "default")])(lambda: None)
    with pytest.raises(ConfigError, match="undeclared queue 'nowhere'"):
        app.job(name="b", throttle=[Throttle(1, HOUR, "nowhere")])(lambda: None)
    with pytest.raises(ConfigError, match=r"list of fairq\.Throttle"):
        app.job(name="c", throttle=Throttle(1, HOUR, "slow"))(lambda: None)  # type: ignore[call-overload]
