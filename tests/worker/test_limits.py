"""Issue 5 in the worker: declared queue order, dynamic weights, heartbeats that charge.

A real worker runs in a thread of the test process, on memory:// and on a SQLite file.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fairq import App, ConfigError, JobState, Throttle
from fairq.worker import Worker
from fairq.worker.weights import checked, refresh

from .helpers import wait_for, wait_state


class Clock:
    """Real time plus a shift the test adds, so interval checks can be driven by hand."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'w.db'}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(url: str, clock: Clock) -> Iterator[App]:
    app = App(url, clock=clock)

    @app.job(name="quick", tenant="tenant")
    def quick(tenant: str, n: int = 0) -> None:
        pass

    yield app
    app.close()


def _weights(app: App) -> dict[str, float]:
    return {r.tenant: r.weight for r in app.stats(queue="default")}


# -- queue order ------------------------------------------------------------------------------


def test_without_queues_a_worker_serves_the_declared_order(app: App) -> None:
    app.queue("critical", strict=True)
    app.queue("default_throttled", weight=3)
    app.queue("default_superslow", weight=1)
    app.queue("default", weight=6)  # declared explicitly after the job: it keeps its weight 6
    assert str(Worker(app).order) == ("critical,default:6,default_throttled:3,default_superslow:1")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("critical,,default", "empty queue name"),
        ("default:x", "not a number"),
        ("default:-1", "positive"),
        ("default:0", "positive"),
        ("a,a:2", "twice"),
        ("bad queue:1", "invalid"),
    ],
)
def test_bad_queue_order_syntax_is_refused(app: App, spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Worker(app, queues=spec)


def test_mixed_strict_and_weighted_orders_are_accepted(app: App) -> None:
    order = Worker(
        app, queues="critical, default:6, default_throttled:3, default_superslow:1"
    ).order
    assert order.next()[0] == "critical"
    assert order.queues == ["critical", "default", "default_throttled", "default_superslow"]


def test_a_default_worker_serves_the_throttle_queues_too(app: App) -> None:
    app.queue("default_throttled", weight=1)

    @app.job(
        name="sync",
        tenant="tenant",
        throttle=[Throttle(threshold=1, per=60, queue="default_throttled")],
    )
    def sync(tenant: str) -> None:
        pass

    ids = [sync.enqueue("greedy") for _ in range(3)]
    assert [app.job_info(i).queue for i in ids] == ["default"] + ["default_throttled"] * 2  # type: ignore[union-attr]
    with Worker(app).in_thread():
        for job_id in ids:
            wait_state(app, job_id, JobState.SUCCEEDED)


def test_heartbeats_charge_a_long_job_while_it_runs(app: App) -> None:
    release = threading.Event()

    @app.job(name="long", tenant="tenant", lease=0.3, cost=0.01)
    def long(tenant: str) -> None:
        release.wait(30)

    job_id = long.enqueue("slowco")
    usage = lambda: app.stats(queue="default", tenant="slowco")[0].usage  # noqa: E731
    with Worker(app).in_thread():
        wait_state(app, job_id, JobState.RUNNING)
        wait_for(lambda: usage() > 0.3, "heartbeats to charge the running job")  # cost was 0.01
        assert app.job_info(job_id).state is JobState.RUNNING  # type: ignore[union-attr]
        release.set()
        wait_state(app, job_id, JobState.SUCCEEDED)


# -- dynamic weights --------------------------------------------------------------------------


def test_callback_weights_reach_the_store_and_weight_0_pauses(app: App) -> None:
    seen: list[list[str]] = []

    @app.tenant_weights("default", every=0.05)
    def weights(tenants: list[str]) -> Mapping[str, float]:
        seen.append(sorted(tenants))
        return {"big": 3.0, "frozen": 0}

    frozen = [app.jobs["quick"].enqueue("frozen", n) for n in range(2)]
    big = [app.jobs["quick"].enqueue("big", n) for n in range(3)]
    with Worker(app, concurrency=2).in_thread():
        for job_id in big:
            wait_state(app, job_id, JobState.SUCCEEDED)
        assert _weights(app) == {"big": 3.0, "frozen": 0.0}
        assert seen[0] == ["big", "frozen"]  # the tenants with pending work, before any ran
        assert all(app.job_info(i).state is JobState.READY for i in frozen)  # type: ignore[union-attr]
        app.weight_callbacks["default"].fn = lambda tenants: {"frozen": 1}  # un-pause
        for job_id in frozen:
            wait_state(app, job_id, JobState.SUCCEEDED)
    assert _weights(app)["frozen"] == 1.0


def test_stored_weights_still_apply_without_a_callback(app: App) -> None:
    app.set_tenant("default", "frozen", weight=0)
    frozen = app.jobs["quick"].enqueue("frozen")
    other = app.jobs["quick"].enqueue("other")
    with Worker(app).in_thread():
        wait_state(app, other, JobState.SUCCEEDED)
        assert app.job_info(frozen).state is JobState.READY  # type: ignore[union-attr]
        app.set_tenant("default", "frozen", weight=1)
        wait_state(app, frozen, JobState.SUCCEEDED)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"a": -1}, "weight -1 of tenant 'a'"),
        ({"a": math.nan}, "weight nan of tenant 'a'"),
        ({"a": math.inf}, "weight inf of tenant 'a'"),
        ({"a": "2"}, "weight '2' of tenant 'a' is not a number"),
        ({"a": True}, "is not a number"),
        ({"a": 1, 3: 1}, "tenant 3"),
        ([("a", 1)], "not a mapping"),
        (None, "NoneType, not a mapping"),
    ],
)
def test_a_bad_answer_keeps_the_last_good_weights_and_logs_why(
    app: App, clock: Clock, caplog: pytest.LogCaptureFixture, answer: Any, problem: str
) -> None:
    answers: list[Any] = [{"a": 2, "b": 0.5}, answer]
    app.tenant_weights("default", every=10)(lambda tenants: answers.pop(0))
    registration = app.weight_callbacks["default"]
    app.jobs["quick"].enqueue("a")
    assert refresh(registration, app.backend, clock())
    assert _weights(app) == {"a": 2.0, "b": 0.5}
    clock.shift += 10
    with caplog.at_level(logging.ERROR, logger="fairq.worker"):
        assert refresh(registration, app.backend, clock())
    assert _weights(app) == {"a": 2.0, "b": 0.5}
    assert registration.last_good == {"a": 2.0, "b": 0.5}
    (record,) = caplog.records
    assert "tenant_weights for queue 'default' failed" in record.getMessage()
    assert problem in record.getMessage()
    assert "keeping the last good weights" in record.getMessage()


def test_an_exception_keeps_the_last_good_weights_and_logs_it(
    app: App, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    calls = 0

    def weights(tenants: list[str]) -> Mapping[str, float]:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("billing database is down")
        return {"a": 4}

    app.tenant_weights("default", every=10)(weights)
    app.jobs["quick"].enqueue("a")
    registration = app.weight_callbacks["default"]
    refresh(registration, app.backend, clock())
    clock.shift += 10
    with caplog.at_level(logging.ERROR, logger="fairq.worker"):
        refresh(registration, app.backend, clock())
    assert _weights(app) == {"a": 4.0}
    assert "RuntimeError: billing database is down" in caplog.text


def test_the_callback_runs_at_most_once_per_interval_per_process(app: App, clock: Clock) -> None:
    calls: list[list[str]] = []
    app.tenant_weights("default", every=30)(lambda tenants: calls.append(tenants) or {})
    registration = app.weight_callbacks["default"]
    app.jobs["quick"].enqueue("a")
    with Worker(app).in_thread(), Worker(app).in_thread():  # two workers, one process
        wait_for(lambda: calls, "the first call")
        for _ in range(5):
            refresh(registration, app.backend, clock())
        assert len(calls) == 1
        clock.shift += 30
        assert refresh(registration, app.backend, clock())
        assert len(calls) == 2


def test_only_changed_weights_are_written(app: App, clock: Clock) -> None:
    app.tenant_weights("default", every=1)(lambda tenants: {t: 2.0 for t in tenants})
    app.jobs["quick"].enqueue("a")
    registration = app.weight_callbacks["default"]
    writes: list[object] = []
    real = app.backend.set_tenant
    app.backend.set_tenant = lambda params: writes.append(params) or real(params)  # type: ignore[method-assign]
    refresh(registration, app.backend, clock())
    clock.shift += 1
    refresh(registration, app.backend, clock())
    assert len(writes) == 1


def test_weights_are_checked_as_a_mapping_of_tenant_to_number() -> None:
    assert checked({"a": 0, "b": 2}) == {"a": 0.0, "b": 2.0}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda app: app.tenant_weights("default", every=0), "every"),
        (lambda app: app.tenant_weights("default", every=-1), "every"),
        (lambda app: app.tenant_weights("bad queue"), "queue name"),
        (lambda app: app.tenant_weights("default")(42), "function"),
    ],
)
def test_bad_weight_registrations_are_refused(app: App, call: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        call(app)


def test_a_queue_has_one_weights_callback(app: App) -> None:
    app.tenant_weights("default")(lambda tenants: {})
    with pytest.raises(ConfigError, match="already has"):
        app.tenant_weights("default")


# -- heartbeats -------------------------------------------------------------------------------


def test_a_heartbeat_rarer_than_a_third_of_a_lease_is_warned_about(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="fairq.worker"):
        Worker(app, heartbeat_interval=20.0)  # the lease is 60 s: a third is 20
        assert not caplog.records
        Worker(app, heartbeat_interval=21.0)
    assert "over a third of the lease of job 'quick' (60 s)" in caplog.text
