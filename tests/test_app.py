"""App-level behaviour: declaring jobs, enqueueing them, and clear errors for bad input.

Every scenario runs on ``memory://`` (the reference model) and on SQLite. Every refused call is
checked to have left what the store already held exactly as it was.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from fairq import App, JobState
from fairq.app import JobDefinition
from fairq.contract import Backend
from fairq.errors import (
    ConfigError,
    InvalidTenant,
    JobArgumentsError,
    MissingTenant,
    PayloadTooLarge,
    StoreUnavailable,
    UnknownJob,
)
from fairq.job import decode_payload

NOW = 1_000_000.0
AppFactory = Callable[..., App]


@pytest.fixture(params=["memory", "sqlite"])
def make_app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AppFactory]:
    """Builds Apps that all share one fresh store (so a second App plays another process)."""
    shared: list[Backend] = []
    apps: list[App] = []

    def make(**options: Any) -> App:
        options.setdefault("clock", lambda: NOW)
        if request.param == "sqlite":
            app = App(f"sqlite:///{tmp_path}/a.db", **options)
            apps.append(app)
            return app
        if not shared:
            shared.append(App("memory://").backend)
        return App("memory://", backend=shared[0], **options)

    yield make
    for app in apps:
        app.close()


@pytest.fixture
def app(make_app: AppFactory) -> App:
    return make_app()


class Jobs:
    """The jobs most scenarios declare."""

    def __init__(self, app: App) -> None:
        @app.job(name="imports.run", queue="imports", tenant="account", max_attempts=5)
        def run_import(account: str, rows: int = 0, note: Any = None) -> int:
            return rows

        @app.job(name="mail.send", tenant="account")
        async def send_mail(account: str, to: str) -> str:
            return to

        @app.job(name="untenanted")
        def untenanted(x: int) -> int:
            return x

        self.run_import: JobDefinition[..., int] = run_import
        self.send_mail: JobDefinition[..., Any] = send_mail
        self.untenanted: JobDefinition[..., int] = untenanted


@pytest.fixture
def jobs(app: App) -> Jobs:
    return Jobs(app)


@pytest.fixture
def stored(app: App, jobs: Jobs) -> list[str]:
    """Something already in the store, that bad calls must leave untouched."""
    return [
        jobs.run_import.enqueue("acme", rows=1),
        jobs.run_import.options(delay=30).enqueue("globex"),
        jobs.send_mail.enqueue("acme", "ops@acme.test"),
    ]


def snapshot(app: App, ids: list[str]) -> tuple[object, ...]:
    return (app.stats(), [app.job_info(i) for i in ids], app.dead())


@pytest.fixture
def unchanged(app: App, stored: list[str]) -> Iterator[None]:
    """Asserts, after the test, that the store holds exactly what it held before."""
    before = snapshot(app, stored)
    yield
    assert snapshot(app, stored) == before


# -- declaring and enqueueing --------------------------------------------------------------


def test_a_declared_job_stays_callable_and_enqueue_returns_its_id(app: App, jobs: Jobs) -> None:
    assert jobs.run_import("acme", rows=3) == 3
    job_id = jobs.run_import.enqueue("acme", rows=3)
    info = app.job_info(job_id)
    assert info is not None
    assert (info.id, info.name, info.tenant) == (job_id, "imports.run", "acme")
    assert info.queue == "imports"
    assert (info.state, info.run_at, info.max_attempts) == (JobState.READY, NOW, 5)
    assert decode_payload(info.payload) == (["acme"], {"rows": 3})


def test_an_async_job_is_declared_and_enqueued_like_a_plain_one(app: App, jobs: Jobs) -> None:
    assert jobs.send_mail.is_async
    assert not jobs.run_import.is_async
    info = app.job_info(jobs.send_mail.enqueue("acme", to="a@b.test"))
    assert info is not None
    assert (info.name, info.queue, info.tenant) == ("mail.send", "default", "acme")


def test_a_bare_decorator_names_the_job_after_its_function(app: App) -> None:
    @app.job
    def tidy(account: str) -> None: ...

    assert tidy.name == f"{__name__}.{tidy.__qualname__}"
    assert tidy.name.endswith("<locals>.tidy")
    assert tidy.name in app.jobs


def test_ids_are_unique(app: App, jobs: Jobs) -> None:
    ids = [jobs.run_import.enqueue("acme") for _ in range(20)]
    assert len(set(ids)) == 20


def test_options_set_tenant_queue_priority_and_delay(app: App, jobs: Jobs) -> None:
    opts = jobs.run_import.options(tenant="other", queue="slow", priority=7, delay=60)
    info = app.job_info(opts.enqueue("acme"))
    assert info is not None
    assert (info.tenant, info.queue, info.priority) == ("other", "slow", 7)
    assert (info.state, info.run_at) == (JobState.SCHEDULED, NOW + 60)


@pytest.mark.parametrize(
    ("when", "run_at"),
    [
        ({"delay": timedelta(minutes=2)}, NOW + 120),
        ({"delay": 0}, NOW),
        ({"run_at": NOW + 5}, NOW + 5),
        ({"run_at": datetime.fromtimestamp(NOW + 9, tz=timezone.utc)}, NOW + 9),
        ({"run_at": NOW - 100}, NOW - 100),
    ],
)
def test_delay_and_run_at_set_when_a_job_may_run(
    app: App, jobs: Jobs, when: dict[str, Any], run_at: float
) -> None:
    info = app.job_info(jobs.run_import.options(**when).enqueue("acme"))
    assert info is not None
    assert info.run_at == run_at
    assert info.state is (JobState.SCHEDULED if run_at > NOW else JobState.READY)


def test_enqueue_many_stores_every_call_in_order(app: App, jobs: Jobs) -> None:
    calls = [jobs.run_import.call("acme", rows=n) for n in range(3)]
    calls.append(jobs.send_mail.call("globex", "x@y.test"))
    ids = app.enqueue_many(calls)
    assert [app.job_info(i).tenant for i in ids] == ["acme", "acme", "acme", "globex"]  # type: ignore[union-attr]
    assert app.enqueue_many([]) == []


def test_enqueue_many_stores_nothing_when_one_call_is_bad(
    app: App, jobs: Jobs, stored: list[str], unchanged: None
) -> None:
    good = jobs.run_import.call("acme", rows=1)
    for bad, error in [
        (jobs.run_import.call("acme", rows=object()), JobArgumentsError),
        (jobs.untenanted.call(1), MissingTenant),
        (jobs.run_import.options(delay=-1).call("acme"), ConfigError),
    ]:
        with pytest.raises(error):
            app.enqueue_many([good, good, bad, good])


def test_enqueue_by_name_with_json_arguments(app: App, jobs: Jobs) -> None:
    info = app.job_info(app.enqueue("imports.run", ["acme"], {"rows": 5}, priority=2))
    assert info is not None
    assert (info.name, info.queue) == ("imports.run", "imports")
    assert (info.tenant, info.priority) == ("acme", 2)
    assert decode_payload(info.payload) == (["acme"], {"rows": 5})


def test_a_producer_without_declarations_enqueues_published_jobs_by_name(
    make_app: AppFactory,
) -> None:
    worker_app = make_app()
    Jobs(worker_app)
    producer = make_app()
    with pytest.raises(UnknownJob, match=r"imports\.run"):
        producer.enqueue("imports.run", ["acme"])
    worker_app.publish()
    by_position = producer.job_info(producer.enqueue("imports.run", ["acme"], {"rows": 2}))
    by_keyword = producer.job_info(producer.enqueue("imports.run", kwargs={"account": "globex"}))
    assert by_position is not None and by_keyword is not None
    assert (by_position.queue, by_position.tenant) == ("imports", "acme")
    assert by_position.max_attempts == 5
    assert by_keyword.tenant == "globex"
    with pytest.raises(MissingTenant):
        producer.enqueue("imports.run", kwargs={"rows": 1})


def test_a_callable_finds_the_tenant_in_the_arguments(make_app: AppFactory) -> None:
    app = make_app()

    @app.job(name="sync", tenant=lambda order: order["shop"])
    def sync(order: dict[str, Any]) -> None: ...

    info = app.job_info(sync.enqueue({"shop": "acme", "id": 7}))
    assert info is not None
    assert info.tenant == "acme"
    app.publish()
    producer = make_app()
    with pytest.raises(MissingTenant):  # a callable cannot be published: pass tenant=
        producer.enqueue("sync", [{"shop": "acme"}])
    info = producer.job_info(producer.enqueue("sync", [{"shop": "acme"}], tenant="acme"))
    assert info is not None
    assert info.tenant == "acme"


def test_an_int_tenant_is_stored_as_its_decimal_text(app: App, jobs: Jobs) -> None:
    info = app.job_info(jobs.run_import.options(tenant=42).enqueue("ignored"))
    assert info is not None
    assert info.tenant == "42"


def test_a_missing_tenant_uses_the_fallback_with_a_warning(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(fallback_tenant="shared")
    jobs = Jobs(app)
    with caplog.at_level(logging.WARNING, logger="fairq"):
        info = app.job_info(jobs.untenanted.enqueue(1))
    assert info is not None
    assert info.tenant == "shared"
    assert "untenanted" in caplog.text and "shared" in caplog.text


def test_tenant_settings_round_trip(app: App) -> None:
    row = app.set_tenant("imports", "acme", weight=3, max_running=2)
    assert (row.weight, row.max_running) == (3.0, 2)
    app.set_queue("imports", weight=2.0, max_running=5)
    assert [(r.tenant, r.weight, r.max_running) for r in app.stats("imports")] == [("acme", 3.0, 2)]
    row = app.set_tenant("imports", "acme", weight=None, max_running=None)
    assert (row.weight, row.max_running) == (2.0, 5)


# -- bad input: a clear error, and nothing stored changes -----------------------------------


def test_a_non_json_argument_is_refused_naming_it(app: App, jobs: Jobs, unchanged: None) -> None:
    with pytest.raises(JobArgumentsError, match=r"'note'.*object"):
        jobs.run_import.enqueue("acme", note=object())
    with pytest.raises(JobArgumentsError, match="positional argument 2"):
        jobs.run_import.enqueue("acme", 1, {1, 2})
    with pytest.raises(JobArgumentsError, match="'note'"):
        jobs.run_import.enqueue("acme", note={1: {"deep": b"bytes"}})


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_is_refused_naming_it(
    app: App, jobs: Jobs, unchanged: None, value: float
) -> None:
    with pytest.raises(JobArgumentsError, match=r"argument 'note'.*non-finite float"):
        jobs.run_import.enqueue("acme", note=value)
    with pytest.raises(JobArgumentsError, match=r"argument 'note'.*float"):
        jobs.run_import.enqueue("acme", note={"nested": [1.0, value]})


def test_an_unknown_job_name_is_refused_listing_the_known_ones(
    app: App, jobs: Jobs, unchanged: None
) -> None:
    with pytest.raises(UnknownJob, match=r"'imports\.rum'.*imports\.run"):
        app.enqueue("imports.rum", ["acme"])


@pytest.mark.parametrize(
    "enqueue",
    [
        lambda jobs: jobs.untenanted.enqueue(1),
        lambda jobs: jobs.run_import.enqueue(""),
        lambda jobs: jobs.run_import.enqueue(None),
        lambda jobs: jobs.run_import.options(tenant="").enqueue("acme"),
    ],
    ids=["no-rule", "empty-arg", "none-arg", "empty-option"],
)
def test_a_missing_or_empty_tenant_is_an_error_by_default(
    app: App, jobs: Jobs, unchanged: None, enqueue: Callable[[Jobs], str]
) -> None:
    with pytest.raises(MissingTenant, match="tenant"):
        enqueue(jobs)


@pytest.mark.parametrize("tenant", [True, 4.2, ["acme"], b"acme", "t" * 65_537])
def test_a_tenant_that_is_not_text_is_refused(
    app: App, jobs: Jobs, unchanged: None, tenant: object
) -> None:
    with pytest.raises(InvalidTenant, match="tenant"):
        jobs.run_import.options(tenant=tenant).enqueue("acme")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "not a URL"),
        ("", "not a URL"),
        ("sqlite", "not a URL"),
        ("mysql://localhost/db", "'mysql' is not supported"),
        ("redis2://localhost", "'redis2' is not supported"),
    ],
)
def test_an_invalid_store_url_is_refused_naming_the_expected_forms(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        App(url).stats()
    assert "sqlite:///" in str(raised.value)


def test_a_sqlite_url_without_a_file_is_refused() -> None:
    with pytest.raises(ConfigError, match="names no file"):
        App("sqlite:///").stats()


def test_a_sqlite_store_in_a_missing_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="not an existing directory"):
        App(f"sqlite:///{tmp_path}/missing/a.db").stats()


@pytest.mark.parametrize("weight", [0, -1, -0.5, math.nan, math.inf, True, "3"])
def test_a_weight_that_is_not_a_positive_number_is_refused(
    app: App, unchanged: None, weight: object
) -> None:
    with pytest.raises(ConfigError, match="weight"):
        app.set_tenant("imports", "acme", weight=weight)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="weight"):
        app.set_queue("imports", weight=weight)  # type: ignore[arg-type]


@pytest.mark.parametrize("cap", [0, -1, 1.5, math.nan, True, "2"])
def test_a_cap_that_is_not_a_whole_number_of_at_least_1_is_refused(
    app: App, unchanged: None, cap: object
) -> None:
    with pytest.raises(ConfigError, match="max_running"):
        app.set_tenant("imports", "acme", max_running=cap)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_running"):
        app.set_queue("imports", max_running=cap)  # type: ignore[arg-type]


def test_a_payload_over_the_limit_is_refused_naming_sizes(
    make_app: AppFactory, stored: list[str], unchanged: None
) -> None:
    jobs = Jobs(make_app(max_payload_bytes=1000))
    with pytest.raises(PayloadTooLarge, match=r"\d+ bytes of JSON, over the limit of 1000 bytes"):
        jobs.run_import.enqueue("acme", note="x" * 1000)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delay": 5, "run_at": NOW + 5}, "not both"),
        ({"run_at": datetime(2030, 1, 1)}, "timezone"),
        ({"run_at": math.nan}, "NaN"),
        ({"run_at": "tomorrow"}, "run_at"),
        ({"delay": -1}, "delay"),
        ({"delay": math.nan}, "delay"),
        ({"delay": True}, "delay"),
        ({"priority": 1.5}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 2**40}, "priority"),
        ({"queue": "no spaces"}, "queue name"),
    ],
)
def test_bad_enqueue_options_are_refused_naming_the_option(
    app: App, jobs: Jobs, unchanged: None, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        jobs.run_import.options(**options).enqueue("acme")


def test_arguments_that_do_not_fit_the_function_are_refused(
    app: App, jobs: Jobs, unchanged: None
) -> None:
    with pytest.raises(JobArgumentsError, match=r"do not fit.*too many positional"):
        jobs.run_import.enqueue("acme", 1, 2, 3)
    with pytest.raises(JobArgumentsError, match=r"do not fit.*'unknown'"):
        jobs.run_import.enqueue("acme", unknown=1)
    with pytest.raises(JobArgumentsError, match=r"do not fit.*'unknown'"):
        jobs.run_import.options(tenant="acme").enqueue("acme", unknown=1)
    with pytest.raises(JobArgumentsError, match="do not fit"):
        app.enqueue("mail.send", ["acme"], tenant="acme")


def test_a_string_is_not_taken_for_a_list_of_arguments(
    make_app: AppFactory, stored: list[str], unchanged: None
) -> None:
    Jobs(make_app()).run_import.app.publish()
    producer = make_app()
    with pytest.raises(JobArgumentsError, match="args must be a list"):
        producer.enqueue("imports.run", "acme")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"tenant": "acount"}, "no argument 'acount'"),
        ({"tenant": 3}, "tenant="),
        ({"queue": "a b"}, "queue name"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"lease": 0}, "lease"),
        ({"lease": math.inf}, "lease"),
        ({"cost": -1}, "cost"),
        ({"retry_base": math.nan}, "retry_base"),
    ],
)
def test_bad_declarations_are_refused_naming_the_setting(
    app: App, declaration: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):

        @app.job(name="bad", **declaration)
        def bad(account: str) -> None: ...

    assert "bad" not in app.jobs


def test_a_job_name_can_be_declared_once(app: App, jobs: Jobs) -> None:
    with pytest.raises(ConfigError, match="already declared"):

        @app.job(name="imports.run")
        def again(account: str) -> None: ...


@pytest.mark.parametrize("size", [0, 63, True, 1.5])
def test_a_payload_limit_must_be_a_sensible_int(size: object) -> None:
    with pytest.raises(ConfigError, match="max_payload_bytes"):
        App("memory://", max_payload_bytes=size)  # type: ignore[arg-type]
