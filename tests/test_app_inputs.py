"""Inputs that once escaped raw or were silently changed (issue #22): each is refused with a
fairq error naming the argument or setting, on every store, and leaves the store as it was.

The stores are the conformance suite's (the reference model, SQLite, Redis, PostgreSQL), each
behind an App, so the checks are shown to run before any store is reached.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance.conftest import BACKENDS

from fairq import App, Rate
from fairq.app import JobDefinition
from fairq.contract import (
    GetJobsParams,
    GetQueueParams,
    JobType,
    PublishJobTypesParams,
    QueueSettings,
    TenantSettingsParams,
)
from fairq.errors import ConfigError, InvalidTenant, JobArgumentsError, JobHeadersError
from fairq.job import MAX_NESTING, NewJob, decode_payload
from fairq.policy.bounds import MAX_INT, MAX_WEIGHT, MIN_WEIGHT


@pytest.fixture(params=list(BACKENDS))
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    directory = tmp_path / "store0"
    directory.mkdir()
    backend = BACKENDS[request.param](directory)
    app = App("memory://", backend=backend)
    yield app
    backend.close()


@pytest.fixture
def job(app: App) -> JobDefinition[..., None]:
    @app.job(name="imports.run", queue="imports", tenant="account")
    def run_import(account: str, data: Any = None, *, note: Any = None) -> None: ...

    return run_import


@pytest.fixture
def unchanged(app: App, job: JobDefinition[..., None]) -> Iterator[None]:
    """Something stored before, that every refused call must leave exactly as it was."""
    app.set_queue("imports", max_running=3, rate="10/minute")
    app.set_tenant("imports", "acme", weight=2, max_running=2)
    ids = [job.enqueue("acme", {"rows": 1}), job.enqueue("globex")]
    before = _snapshot(app, ids)
    yield
    assert _snapshot(app, ids) == before


def _snapshot(app: App, ids: list[str]) -> object:
    stats = [(s.tenant, s.weight, s.max_running, s.rate, s.ready) for s in app.stats()]
    return (
        stats,
        app.backend.get_queue(GetQueueParams(queue="imports")),
        app.backend.get_jobs(GetJobsParams(ids=ids)),
    )


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


# -- job arguments ----------------------------------------------------------------------------


def test_a_lone_surrogate_is_refused_naming_the_argument(
    app: App, job: JobDefinition[..., None], unchanged: None
) -> None:
    with pytest.raises(JobArgumentsError, match=r"positional argument 1 .*lone surrogate"):
        job.enqueue("acme", "\ud800")
    with pytest.raises(JobArgumentsError, match=r"argument 'note' .*'\\ud800'.*lone surrogate"):
        job.enqueue("acme", note={"k": ["x\ud800"]})
    with pytest.raises(JobArgumentsError, match=r"lone surrogate"):
        app.enqueue("imports.run", ["acme"], {"note": {"\udcff": 1}})


def test_arguments_nested_too_deep_are_refused_naming_the_argument(
    app: App, job: JobDefinition[..., None], unchanged: None
) -> None:
    with pytest.raises(JobArgumentsError, match=r"positional argument 1 .*nested more than"):
        job.enqueue("acme", _nested(100_000))
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(JobArgumentsError, match=r"argument 'note' .*contains itself"):
        job.enqueue("acme", note=looped)


def test_nesting_up_to_the_limit_is_stored_as_given(
    app: App, job: JobDefinition[..., None]
) -> None:
    deepest = _nested(MAX_NESTING - 1)  # the argument itself is the first level
    info = app.job_info(job.enqueue("acme", deepest))
    assert info is not None
    assert decode_payload(info.payload)[0] == ["acme", deepest]


@pytest.mark.parametrize("key", [1, None, 1.5, True, (1, 2)], ids=repr)
def test_dict_keys_that_are_not_str_are_refused_naming_argument_and_key(
    app: App, job: JobDefinition[..., None], unchanged: None, key: Any
) -> None:
    shown = re.escape(repr(key))
    with pytest.raises(JobArgumentsError, match=rf"positional argument 1 .*dict key {shown}"):
        job.enqueue("acme", {"ok": "a", key: "b"})
    with pytest.raises(JobArgumentsError, match=rf"argument 'note' .*dict key {shown}"):
        job.enqueue("acme", note=[{"deeper": {key: 1}}])


# -- integer (and other) settings: one range for every store ----------------------------------


TOO_BIG = [MAX_INT + 1, 2**63, 2**64 + 1]


@pytest.mark.parametrize("cap", TOO_BIG, ids=str)
def test_a_cap_beyond_32_bits_is_refused_on_every_store(
    app: App, unchanged: None, cap: int
) -> None:
    with pytest.raises(ConfigError, match=r"max_running .* 2,147,483,647"):
        app.set_queue("imports", max_running=cap)
    with pytest.raises(ConfigError, match=r"max_running .* 2,147,483,647"):
        app.set_tenant("imports", "acme", max_running=cap)
    with pytest.raises(ConfigError, match=r"max_in_flight .* 2,147,483,647"):
        app.set_queue("imports", max_in_flight=cap)


@pytest.mark.parametrize("count", TOO_BIG, ids=str)
def test_a_rate_count_or_burst_beyond_32_bits_is_refused(
    app: App, unchanged: None, count: int
) -> None:
    with pytest.raises(ConfigError, match="rate's count"):
        app.set_tenant("imports", "acme", rate=f"{count}/minute")
    with pytest.raises(ConfigError, match="rate's count"):
        app.set_queue("imports", rate=f"{count}/s")
    with pytest.raises(ConfigError, match="rate's burst"):
        Rate(1, 60, burst=count)


@pytest.mark.parametrize("weight", [MAX_WEIGHT * 10, MIN_WEIGHT / 10, 1e308, 5e-324], ids=str)
def test_a_weight_outside_the_range_is_refused(app: App, unchanged: None, weight: float) -> None:
    with pytest.raises(ConfigError, match="weight must be"):
        app.set_tenant("imports", "acme", weight=weight)
    with pytest.raises(ConfigError, match="weight must be"):
        app.set_queue("imports", weight=weight)


def test_job_settings_beyond_what_every_store_holds_are_refused(
    app: App, job: JobDefinition[..., None], unchanged: None
) -> None:
    with pytest.raises(ConfigError, match="priority"):
        job.options(priority=MAX_INT + 1).enqueue("acme")
    with pytest.raises(ConfigError, match="priority"):
        job.options(priority=-MAX_INT - 2).enqueue("acme")
    for setting, value in [("max_attempts", MAX_INT + 1), ("lease", 1e300), ("cost", 1e300)]:
        with pytest.raises(ConfigError, match=setting):
            app.job(name=f"bad.{setting}", **{setting: value})(lambda account: None)


def test_the_range_is_checked_in_the_params_every_store_takes() -> None:
    """Code that calls a store directly gets the same refusal: the check is in the params."""
    with pytest.raises(ConfigError, match="max_running"):
        QueueSettings(queue="q", max_running=2**31)
    with pytest.raises(ConfigError, match="max_running"):
        TenantSettingsParams(queue="q", tenant="t", now=0.0, max_running=2**63)
    with pytest.raises(InvalidTenant, match="NUL"):
        TenantSettingsParams(queue="q", tenant="a\x00", now=0.0)
    fields: dict[str, Any] = dict(
        id="j", name="n", queue="q", tenant="t", payload="{}", run_at=0.0,
        max_attempts=1, lease_timeout=1.0, cost=1.0,
    )  # fmt: skip
    NewJob(**fields)
    for field, bad in [("max_attempts", 2**31), ("priority", 2**31), ("tenant", "\x00")]:
        with pytest.raises((ConfigError, InvalidTenant), match=field.replace("tenant", "NUL")):
            NewJob(**{**fields, field: bad})


def test_the_largest_values_in_range_are_stored_as_given(
    app: App, job: JobDefinition[..., None]
) -> None:
    app.set_queue(
        "imports", max_running=MAX_INT, rate=Rate(MAX_INT, 1, burst=MAX_INT), max_in_flight=MAX_INT
    )
    row = app.set_tenant("imports", "acme", weight=MAX_WEIGHT, max_running=MAX_INT)
    assert (row.weight, row.max_running, row.rate) == (
        MAX_WEIGHT, MAX_INT, Rate(MAX_INT, 1, burst=MAX_INT)
    )  # fmt: skip
    queue = app.backend.get_queue(GetQueueParams(queue="imports"))
    assert (queue.max_running, queue.rate) == (MAX_INT, Rate(MAX_INT, 1, burst=MAX_INT))
    assert queue.max_in_flight == MAX_INT
    info = app.job_info(job.options(priority=MAX_INT).enqueue("acme"))
    assert info is not None and info.priority == MAX_INT


# -- tenant ids ---------------------------------------------------------------------------------


def test_a_tenant_id_with_nul_is_refused_everywhere(
    app: App, job: JobDefinition[..., None], unchanged: None
) -> None:
    with pytest.raises(InvalidTenant, match=r"NUL"):
        job.enqueue("ac\x00me")
    with pytest.raises(InvalidTenant, match=r"NUL"):
        job.options(tenant="\x00").enqueue("acme")
    with pytest.raises(InvalidTenant, match=r"NUL"):
        app.set_tenant("imports", "ac\x00me", weight=2)
    with pytest.raises(InvalidTenant, match=r"NUL"):
        app.stats(tenant="ac\x00me")
    with pytest.raises(InvalidTenant, match=r"NUL"):
        app.dead(tenant="ac\x00me")
    with pytest.raises(InvalidTenant, match=r"NUL"):
        App("memory://", fallback_tenant="\x00")


# -- enqueue by name: the published signature ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (["acme", 1, 2], {}, "too many positional arguments"),
        ([], {"data": 1}, "missing a required argument: 'account'"),
        (["acme"], {"account": "x"}, "multiple values for argument 'account'"),
        (["acme"], {"unknown": 1}, "unexpected keyword argument 'unknown'"),
    ],
)
def test_by_name_arguments_that_do_not_fit_the_published_job_are_refused(
    app: App,
    job: JobDefinition[..., None],
    unchanged: None,
    args: list[Any],
    kwargs: dict[str, Any],
    message: str,
) -> None:
    app.publish()
    producer = App("memory://", backend=app.backend)
    with pytest.raises(JobArgumentsError, match=rf"imports\.run.*{message}"):
        producer.enqueue("imports.run", args, {**kwargs})


def test_by_name_arguments_that_fit_are_stored(app: App, job: JobDefinition[..., None]) -> None:
    app.publish()
    producer = App("memory://", backend=app.backend)
    job_id = producer.enqueue("imports.run", ["acme", [1]], {"note": "n"})
    info = app.job_info(job_id)
    assert info is not None and decode_payload(info.payload) == (["acme", [1]], {"note": "n"})


def test_a_published_job_without_its_signature_is_enqueued_with_a_warning(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """As published by an older fairq: only the positional names, so nothing can be checked."""
    old = JobType(
        name="old",
        queue="imports",
        tenant_arg="account",
        params=("account",),
        max_attempts=3,
        lease_timeout=60.0,
        cost=1.0,
    )
    app.backend.publish_job_types(PublishJobTypesParams(types=[old]))
    with caplog.at_level(logging.WARNING, logger="fairq"):
        assert app.enqueue("old", ["acme", 1, 2, 3])
    assert "could not be checked" in caplog.text


# -- job headers ------------------------------------------------------------------------------


def test_headers_travel_with_the_job_from_every_enqueue_path(
    app: App, job: JobDefinition[..., None]
) -> None:
    trace = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    first = job.options(headers=trace).enqueue("acme")
    second = app.enqueue("imports.run", ["globex"], headers={"ключ": "значение ✓"})
    plain = job.enqueue("initech")
    infos = {i.id: i for i in app.backend.get_jobs(GetJobsParams(ids=[first, second, plain]))}
    assert infos[first].headers == trace
    assert infos[second].headers == {"ключ": "значение ✓"}
    assert infos[plain].headers == {}


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"n": 1}, r"header 'n': 1 is not str to str"),
        ({1: "x"}, r"header 1: 'x' is not str to str"),
        (["traceparent"], r"headers must be a mapping of str to str, got list"),
        ({"big": "x" * 5000}, r"headers are 50\d\d bytes of JSON, over the limit of 4096"),
        ({"k": "\ud800"}, r"lone surrogate"),
    ],
)
def test_bad_headers_are_refused_naming_the_problem_and_nothing_is_stored(
    app: App, job: JobDefinition[..., None], unchanged: None, headers: Any, problem: str
) -> None:
    with pytest.raises(JobHeadersError, match=problem):
        job.options(headers=headers).enqueue("acme")
    with pytest.raises(JobHeadersError, match=problem):
        app.enqueue_many([job.call("acme"), job.options(headers=headers).call("globex")])
