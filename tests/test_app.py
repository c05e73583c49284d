"""App-level behaviour: declaring jobs, enqueueing them, and clear errors for bad input.

Every scenario runs on ``memory://`` (the reference model) and on SQLite. Every refused call is
checked to have left what the store already held exactly as it was.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import fairq
from fairq import App, JobState, Throttle
from fairq.app import JobDefinition
from fairq.contract import Backend, DequeueParams, GetQueueParams, QueueSettings, TenantStats
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
from fairq.reports import verdicts as status
from fairq.reports.verdicts import ThrottleHit

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
    with pytest.raises(JobArgumentsError, match="missing a required argument: 'account'"):
        producer.enqueue("imports.run", kwargs={"rows": 1})
    with pytest.raises(MissingTenant):
        producer.enqueue("imports.run", kwargs={"account": None})


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
    app.set_queue("imports", max_in_flight=7)
    assert app.backend.get_queue(GetQueueParams(queue="imports")).max_in_flight == 7


def test_set_queue_changes_only_the_settings_it_is_given(app: App) -> None:
    def stored() -> QueueSettings:
        return app.backend.get_queue(GetQueueParams(queue="imports"))

    app.set_queue("imports", max_running=4, rate="10/s", half_life=timedelta(minutes=10))
    app.set_queue("imports", max_in_flight=20)
    app.set_queue("imports", weight=2)
    first = QueueSettings(queue="imports", weight=2.0, max_running=4, rate=fairq.Rate(10, 1.0),
                          half_life=600.0, max_in_flight=20)  # fmt: skip
    assert stored() == first
    app.set_queue("imports", rate=None, max_debt=30)  # None removes the rate, and only it
    assert stored() == replace(first, rate=None, max_debt=30.0)
    app.set_queue("imports")  # nothing given: nothing changes
    assert stored().max_running == 4


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


@pytest.mark.parametrize("weight", [-1, -0.5, math.nan, math.inf, True, "3"])
def test_a_weight_that_is_not_a_positive_number_is_refused(
    app: App, unchanged: None, weight: object
) -> None:
    with pytest.raises(ConfigError, match="weight"):
        app.set_tenant("imports", "acme", weight=weight)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="weight"):
        app.set_queue("imports", weight=weight)  # type: ignore[arg-type]


def test_a_queue_default_weight_of_0_is_refused_only_tenants_can_be_paused(
    app: App, unchanged: None
) -> None:
    with pytest.raises(ConfigError, match="weight"):
        app.set_queue("imports", weight=0)


@pytest.mark.parametrize("weight", [1e300, 1e-9, 0, math.inf, True])
def test_a_declared_queue_weight_has_the_same_range_as_every_weight(
    app: App, weight: object
) -> None:
    with pytest.raises(
        ConfigError, match=r"queue 'reports': weight must be .* from 1e-06 to 1e\+06"
    ):
        app.queue("reports", weight=weight)  # type: ignore[arg-type]


@pytest.mark.parametrize("cap", [0, -1, 1.5, math.nan, True, "2"])
def test_a_cap_that_is_not_a_whole_number_of_at_least_1_is_refused(
    app: App, unchanged: None, cap: object
) -> None:
    with pytest.raises(ConfigError, match="max_running"):
        app.set_tenant("imports", "acme", max_running=cap)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_running"):
        app.set_queue("imports", max_running=cap)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_in_flight"):
        app.set_queue("imports", max_in_flight=cap)  # type: ignore[arg-type]


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
        ({"run_at": math.nan}, "finite"),
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


# -- queue declarations, throttle rules, tenant reports (issue 5) ---------------------------


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_declared_queues_give_the_default_worker_order(make_app: AppFactory) -> None:
    app = make_app()
    app.queue("critical", strict=True)
    app.queue("default", weight=6)
    app.queue("default_throttled", weight=3)
    app.queue("default_superslow", weight=1)
    app.job(name="other", queue="reports", tenant="t")(lambda t: None)  # implicit: weight 1
    assert str(app.queue_order()) == (
        "critical,default:6,default_throttled:3,default_superslow:1,reports:1"
    )


def test_a_home_queue_is_declared_implicitly_and_may_be_declared_after(app: App) -> None:
    app.job(name="a", queue="imports", tenant="t")(lambda t: None)
    assert str(app.queue_order()) == "imports:1"
    app.queue("imports", weight=4)
    app.queue("urgent", strict=True)
    assert str(app.queue_order()) == "urgent,imports:4"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weight": 0}, "weight"),
        ({"weight": -1}, "weight"),
        ({"weight": math.nan}, "weight"),
        ({"weight": "6"}, "weight"),
        ({"strict": "yes"}, "strict"),
    ],
)
def test_bad_queue_declarations_are_refused(app: App, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        app.queue("default", **kwargs)
    with pytest.raises(ConfigError, match="queue name"):
        app.queue("bad queue!")


def test_a_queue_is_declared_once(app: App) -> None:
    app.queue("slow", weight=1)
    with pytest.raises(ConfigError, match="already declared"):
        app.queue("slow", weight=2)


def _throttled_job(app: App, *rules: Throttle, queue: str = "default") -> JobDefinition[..., Any]:
    @app.job(name="sync", queue=queue, tenant="tenant", throttle=list(rules))
    def sync(tenant: str | None = None) -> None:
        pass

    return sync


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (lambda: Throttle(threshold=1, per=60, queue="default"), "own queue"),
        (lambda: Throttle(threshold=1, per=60, queue="nowhere"), "undeclared queue 'nowhere'"),
        (lambda: Throttle(threshold=0, per=60, queue="slow"), "threshold"),
        (lambda: Throttle(threshold=-1, per=60, queue="slow"), "threshold"),
        (lambda: Throttle(threshold=1, per=0, queue="slow"), "per"),
        (lambda: Throttle(threshold=1, per=-5, queue="slow"), "per"),
        (lambda: Throttle(threshold=1, per=32 * 86400, queue="slow"), "31 days"),
        (lambda: Throttle(threshold=1, per=math.nan, queue="slow"), "per"),
        (lambda: Throttle(threshold=1, per=60, queue="bad queue"), "queue name"),
        (lambda: {"threshold": 1, "per": 60, "queue": "slow"}, "fairq.Throttle"),
    ],
)
def test_bad_throttle_rules_are_refused_at_declaration(
    app: App, rule: Callable[[], Any], message: str
) -> None:
    app.queue("slow", weight=1)
    with pytest.raises(ConfigError, match=message):
        _throttled_job(app, rule())
    assert "sync" not in app.jobs


def test_throttle_rules_must_be_a_list_and_their_queue_declared_first(app: App) -> None:
    with pytest.raises(ConfigError, match="list"):
        app.job(name="x", tenant="t", throttle=Throttle(1, 60, "slow"))(lambda t: None)  # type: ignore[call-overload]
    with pytest.raises(ConfigError, match="declare it"):
        _throttled_job(app, Throttle(threshold=1, per=60, queue="slow"))
    app.queue("slow")
    _throttled_job(app, Throttle(threshold=1, per=60, queue="slow"))


def _worked_example_app(make_app: AppFactory, clock: Clock) -> tuple[App, JobDefinition[..., Any]]:
    app = make_app(clock=clock)
    app.queue("slow", weight=1)
    app.queue("slower", weight=1)
    rules = (
        Throttle(threshold=1, per=86400, queue="slow"),
        Throttle(threshold=1, per=3600, queue="slower"),
    )
    return app, _throttled_job(app, *rules)


def test_the_worked_example_of_the_issue_routes_exactly(make_app: AppFactory) -> None:
    clock = Clock(0.0)
    app, sync = _worked_example_app(make_app, clock)
    went = []
    for at, tenant in [(0, "foo"), (1, "foo"), (2, "bar"), (3602, "foo"), (86400 + 3603, "foo")]:
        clock.now = float(at)
        info = app.job_info(sync.enqueue(tenant))
        assert info is not None
        went.append(info.queue)
    assert went == ["default", "slower", "default", "slow", "default"]


def test_published_rules_apply_to_enqueue_by_name(make_app: AppFactory) -> None:
    clock = Clock(0.0)
    worker_app, _ = _worked_example_app(make_app, clock)
    worker_app.publish()
    producer = make_app(clock=clock)  # declares nothing
    assert producer.backend.job_types()["sync"].throttle == worker_app.jobs["sync"].throttle
    first, second = (producer.enqueue("sync", ["foo"]) for _ in range(2))
    assert [producer.job_info(i).queue for i in (first, second)] == ["default", "slower"]  # type: ignore[union-attr]


def test_an_explicit_queue_is_never_rerouted_nor_counted(make_app: AppFactory) -> None:
    clock = Clock(0.0)
    app, sync = _worked_example_app(make_app, clock)
    for _ in range(3):
        info = app.job_info(sync.options(queue="default").enqueue("foo"))
        assert info is not None and info.queue == "default"
    info = app.job_info(sync.enqueue("foo"))
    assert info is not None and info.queue == "default"  # the first one counted


def test_the_fallback_tenant_passes_through_with_a_warning(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(0.0)
    app = make_app(clock=clock, fallback_tenant="anonymous")
    app.queue("slow")
    sync = _throttled_job(app, Throttle(threshold=1, per=60, queue="slow"))
    with caplog.at_level(logging.WARNING, logger="fairq"):
        ids = [sync.enqueue() for _ in range(3)]
    assert {app.job_info(i).queue for i in ids} == {"default"}  # type: ignore[union-attr]
    assert "throttle rules are not applied" in caplog.text


def test_a_reroute_is_logged_at_debug(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(0.0)
    app, sync = _worked_example_app(make_app, clock)
    with caplog.at_level(logging.DEBUG, logger="fairq"):
        app.enqueue_many([sync.call("foo"), sync.call("foo")])
    (record,) = [r for r in caplog.records if getattr(r, "action", None) == "throttled"]
    assert "instead of 'default'" in record.getMessage() and "'slower'" in record.getMessage()


def _report(app: App, queue: str = "default") -> dict[str, Any]:
    return {r.tenant: r for r in app.tenant_report(queue)}


def test_tenant_report_says_why_each_tenant_is_not_running(make_app: AppFactory) -> None:
    clock = Clock(NOW)
    app = make_app(clock=clock)
    app.queue("slow")
    sync = _throttled_job(app, Throttle(threshold=2, per=600, queue="slow"))
    app.set_tenant("default", "capped", max_running=1)
    app.set_tenant("default", "limited", rate="1/minute")
    app.set_tenant("default", "paused", weight=0)
    for tenant, n in [("capped", 2), ("limited", 2), ("paused", 1), ("busy", 1), ("greedy", 3)]:
        for _ in range(n):
            sync.enqueue(tenant)
    app.backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=NOW, limit=4))
    sync.options(delay=60).enqueue("sleepy")
    sync.enqueue("waiting")
    report = _report(app)
    statuses = {t: (r.status, r.reason) for t, r in report.items()}
    assert statuses["capped"] == ("capped", "capped (1/1 running)")
    assert statuses["limited"][0] == "rate-limited"
    assert report["limited"].limited_until == NOW + 60
    assert "eligible again at" in statuses["limited"][1] and "in 60.0s" in statuses["limited"][1]
    assert statuses["paused"] == ("paused", "paused (weight 0)")
    # the store keeps the newest threshold + 1 = 3 times, all in the window: "at least 3"
    assert statuses["greedy"] == ("throttled", "throttled (≥3 in last 10m > 2 → slow)")
    assert report["greedy"].throttle == ThrottleHit("sync", 3, 2, 600.0, "slow", at_least=True)
    assert statuses["sleepy"] == ("idle", "idle")
    assert statuses["waiting"] == ("waiting its turn", "waiting its turn")
    running = [t for t, r in report.items() if r.status == "running"]
    assert running and all(report[t].running for t in running)
    assert math.isclose(sum(r.share for r in report.values()), 1.0)
    served = [t for t, r in report.items() if r.share > 0]
    assert set(served) == {t for t, r in report.items() if r.running}
    assert app.tenant_report("default", tenant="paused")[0].tenant == "paused"
    clock.now = NOW + 601  # the window has moved on
    assert _report(app)["greedy"].status != "throttled"


# -- the verdicts themselves (fairq.reports.verdicts, pure) ----------------------------------------


def _row(**fields: Any) -> TenantStats:
    base: dict[str, Any] = {
        "queue": "q", "tenant": "t", "weight": 1.0, "max_running": None, "ready": 1,
        "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0, "dead": 0,
        "oldest_ready_at": None,
    }  # fmt: skip
    return TenantStats(**{**base, **fields})


HIT = ThrottleHit("sync", 5, 3, 3600.0, "slow")


@pytest.mark.parametrize(
    ("fields", "hit", "expected"),
    [
        ({"weight": 0.0, "max_running": 1, "running": 1}, HIT, "paused (weight 0)"),
        ({"max_running": 1, "running": 1, "limited_until": NOW + 5}, HIT, "capped (1/1 running)"),
        ({"limited_until": NOW + 5}, HIT, "rate-limited (eligible again at"),
        ({"limited_until": NOW}, None, "waiting its turn"),  # the hold has just ended
        ({"running": 1}, HIT, "throttled (5 in last 1h > 3 → slow)"),
        ({"running": 1, "ready": 0, "max_running": 1}, None, "running"),
        ({"ready": 0, "max_running": 1, "limited_until": NOW + 5}, None, "idle"),
        ({"ready": 0, "scheduled": 4}, None, "idle"),
    ],
)
def test_the_first_verdict_that_applies_wins(
    fields: dict[str, Any], hit: ThrottleHit | None, expected: str
) -> None:
    assert status.verdict(_row(**fields), NOW, hit)[1].startswith(expected)


def test_shares_split_recent_usage_and_are_0_when_nobody_was_served() -> None:
    assert status.shares({"a": 3.0, "b": 1.0}) == {"a": 0.75, "b": 0.25}
    assert status.shares({"a": 0.0, "b": 0.0}) == {"a": 0.0, "b": 0.0}


def test_a_throttle_hit_is_the_last_matching_rule_and_knows_when_its_count_is_a_floor() -> None:
    rules = [Throttle(1, 86400, "slow"), Throttle(1, 3600, "slower")]
    assert status.throttle_hit("j", [0.0, 1.0], 1.0, rules) == ThrottleHit(
        "j", 2, 1, 3600.0, "slower", at_least=True
    )
    assert status.throttle_hit("j", [1.0, 3602.0], 3602.0, rules) == ThrottleHit(
        "j", 2, 1, 86400.0, "slow", at_least=True
    )
    assert status.throttle_hit("j", [3602.0], 90003.0, rules) is None
    wide = [Throttle(1, 60, "slow"), Throttle(5, 60, "slower")]
    assert status.throttle_hit("j", [0.0, 1.0], 1.0, wide) == ThrottleHit("j", 2, 1, 60.0, "slow")


# -- a tenant function that raises; durations as timedelta (issue 17, part 5) ----------------


def test_a_tenant_function_that_raises_is_a_missing_tenant_naming_job_and_cause(
    app: App, jobs: Jobs, unchanged: None
) -> None:
    @app.job(name="reports.build", tenant=lambda report: report["org"])
    def build(report: dict[str, str]) -> None: ...

    with pytest.raises(MissingTenant, match=r"'reports\.build'.*KeyError: 'org'") as raised:
        build.enqueue({"name": "q3"})
    assert isinstance(raised.value.__cause__, KeyError)


def test_every_duration_may_be_a_timedelta(app: App) -> None:
    app.queue("slow")

    @app.job(
        name="timed", tenant="account", lease=timedelta(minutes=2), cost=timedelta(seconds=3),
        retry_base=timedelta(seconds=5),
        throttle=[Throttle(threshold=5, per=timedelta(hours=1), queue="slow")],
    )  # fmt: skip
    def timed(account: str) -> None: ...

    assert (timed.lease_timeout, timed.cost, timed.retry_base) == (120.0, 3.0, 5.0)
    assert timed.throttle[0].per == 3600.0
    assert fairq.Rate(10, timedelta(minutes=1)) == fairq.Rate(10, 60)
    app.set_queue("timed", rate=fairq.Rate(10, timedelta(minutes=1)), half_life=timedelta(hours=1),
                  max_debt=timedelta(minutes=1))  # fmt: skip
    settings = app.backend.get_queue(GetQueueParams(queue="timed"))
    assert (settings.rate, settings.half_life, settings.max_debt) == (fairq.Rate(10, 60), 3600, 60)
    info = app.job_info(timed.enqueue("acme"))
    assert info is not None and info.state is JobState.READY
