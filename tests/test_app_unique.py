"""Unique jobs through the App (docs/unique.md): per call and declared, keyed by a template,
a function or the arguments; bad settings refused at the call that made them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from fairq import App, JobState, Throttle
from fairq.contract import DequeueParams
from fairq.errors import ConfigError
from fairq.instrument import Middleware
from fairq.job import NewJob

NOW = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Enqueued(Middleware):
    def __init__(self) -> None:
        self.seen: list[tuple[list[str], list[str] | None]] = []

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        self.seen.append(([job.id for job in jobs], None if queues is None else list(queues)))


@pytest.fixture(params=["memory", "sqlite"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/a.db"
    built = App(url, clock=Clock())
    yield built
    built.close()


def states(app: App, *ids: str) -> list[JobState]:
    found = [app.job_info(job_id) for job_id in ids]
    return [info.state for info in found if info is not None]


def test_a_key_given_when_enqueueing(app: App) -> None:
    @app.job(tenant="account")
    def sync(account: str, full: bool = False) -> None: ...

    once = sync.options(unique_key="sync", unique_for=timedelta(minutes=5))
    first = once.enqueue("acme")
    assert once.enqueue("acme", full=True) == first  # the key, not the arguments, decides
    assert once.enqueue("globex") != first  # another tenant
    assert len({first, sync.enqueue("acme")}) == 2  # no key: a job like any other
    assert [s.ready for s in app.stats()] == [2, 1]


def test_a_declared_window_keys_the_job_by_its_arguments(app: App) -> None:
    @app.job(tenant="account", unique_for=60)
    def report(account: str, month: str) -> None: ...

    first = report.enqueue("acme", "2024-05")
    assert report.enqueue("acme", "2024-05") == first
    assert report.enqueue("acme", "2024-06") != first
    app.clock.now += 60  # type: ignore[attr-defined]
    assert report.enqueue("acme", "2024-05") != first  # the window ended
    by_name = app.enqueue(report.name, ["acme", "2024-06"])
    assert by_name == report.enqueue("acme", "2024-06")


def test_a_declared_template_and_function(app: App) -> None:
    @app.job(tenant="account", unique_for=timedelta(hours=1), unique_key="import:{path}")
    def load(account: str, path: str, attempt: int = 0) -> None: ...

    @app.job(tenant="account", unique_for=600, unique_key=lambda account, ids: min(ids))
    def touch(account: str, ids: list[int]) -> None: ...

    assert load.enqueue("acme", "a.csv") == load.enqueue("acme", path="a.csv", attempt=2)
    assert touch.enqueue("acme", [3, 1]) == touch.enqueue("acme", [1, 2])
    # a key given when enqueueing wins over the declared one
    other = load.options(unique_key="other").enqueue("acme", "a.csv")
    assert other != load.enqueue("acme", "a.csv")


def test_a_new_job_once_the_first_ran(app: App) -> None:
    @app.job(tenant="account", unique_for=600)
    def sync(account: str) -> None: ...

    first = sync.enqueue("acme")
    (lease,) = app.backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=NOW)).leases
    assert sync.enqueue("acme") == first  # running
    from fairq.contract import AckManyParams

    app.backend.ack_many(AckManyParams(tokens=[lease.token], now=NOW))
    second = sync.enqueue("acme")
    assert second != first
    assert states(app, first, second) == [JobState.SUCCEEDED, JobState.READY]


def test_a_batch_with_repeats_stores_each_key_once(app: App) -> None:
    @app.job(tenant="account", unique_for=600)
    def sync(account: str) -> None: ...

    ids = app.enqueue_many([sync.call("acme"), sync.call("globex"), sync.call("acme")])
    assert ids[0] == ids[2] != ids[1]
    assert sum(s.ready for s in app.stats()) == 2


def test_the_hooks_after_an_enqueue_see_only_the_jobs_stored(app: App) -> None:
    recorder = Enqueued()
    app.add_middleware(recorder)

    @app.job(tenant="account", unique_for=600)
    def sync(account: str) -> None: ...

    first = sync.enqueue("acme")
    sync.enqueue("acme")
    ids = app.enqueue_many([sync.call("acme"), sync.call("globex")])
    assert recorder.seen == [([first], ["default"]), ([], []), ([ids[1]], ["default"])]


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"unique_for": 0}, "unique_for must be more than 0"),
        ({"unique_for": -5}, "unique_for must be more than 0"),
        ({"unique_for": "1h"}, "unique_for must be a number of seconds or a datetime.timedelta"),
        ({"unique_for": timedelta(0)}, "unique_for must be more than 0"),
        ({"unique_key": "{account}"}, "unique_key needs unique_for"),
        ({"unique_for": 60, "unique_key": "{acount}"}, "names acount, not arguments of the job"),
        ({"unique_for": 60, "unique_key": "{account"}, "is not a template"),
        ({"unique_for": 60, "unique_key": 7}, "must be a template of argument names"),
        (
            {"unique_for": 60, "throttle": [Throttle(5, 60.0, "slow")]},
            "takes no throttle rules",
        ),
    ],
)
def test_bad_declarations_are_refused(app: App, settings: dict[str, object], problem: str) -> None:
    app.queue("slow")
    with pytest.raises(ConfigError, match=problem):
        app.job(tenant="account", **settings)(lambda account: None)  # type: ignore[arg-type]


def test_bad_keys_and_windows_when_enqueueing_are_refused(app: App) -> None:
    app.queue("slow")

    @app.job(tenant="account")
    def plain(account: str) -> None: ...

    @app.job(tenant="account", throttle=[Throttle(5, 60.0, "slow")])
    def throttled(account: str) -> None: ...

    with pytest.raises(ConfigError, match="unique_key needs unique_for"):
        plain.options(unique_key="k").enqueue("acme")
    with pytest.raises(ConfigError, match="unique_for must be more than 0"):
        plain.options(unique_key="k", unique_for=0).enqueue("acme")
    with pytest.raises(ConfigError, match="over 1024"):
        plain.options(unique_key="k" * 1025, unique_for=5).enqueue("acme")
    with pytest.raises(ConfigError, match=r"enqueue it with queue=…"):
        throttled.options(unique_key="k", unique_for=5).enqueue("acme")
    assert app.stats() == []
    # with an explicit queue no rule applies, so the key may be kept
    throttled.options(unique_key="k", unique_for=5, queue="default").enqueue("acme")


def test_a_declared_key_that_cannot_be_made_is_refused_naming_the_call(app: App) -> None:
    """A template reaching into an argument, or a function, may fail or give nothing for
    one call: a ConfigError at that enqueue, never another key in its place."""

    @app.job(tenant="account", unique_for=60, unique_key="{ids[2]}")
    def third(account: str, ids: list[int]) -> None: ...

    @app.job(tenant="account", unique_for=60, unique_key="{account.upper}")
    def attribute(account: str) -> None: ...

    @app.job(tenant="account", unique_for=60, unique_key=lambda account, tag: tag)
    def tagged(account: str, tag: str | None) -> None: ...

    with pytest.raises(ConfigError, match=r"unique_key template '\{ids\[2\]\}' raised IndexError"):
        third.enqueue("acme", [1])
    with pytest.raises(ConfigError, match=r"unique_key template .* raised AttributeError"):
        app.job(tenant="n", unique_for=60, unique_key="{n.nope}", name="n")(
            lambda n: None  # type: ignore[arg-type]
        ).enqueue(5)
    with pytest.raises(ConfigError, match="unique_key function returned None; return the key"):
        tagged.enqueue("acme", None)
    assert app.stats() == []  # nothing stored by the refused calls
    assert attribute.enqueue("acme") == attribute.enqueue("acme")  # an attribute that exists
    assert tagged.enqueue("acme", "x") == tagged.enqueue("acme", "x")
