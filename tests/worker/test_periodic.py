"""Periodic jobs on an injected clock (docs/periodic.md): one job per tick however many
schedulers run, the missed-tick policy, and declarations refused with the fix named."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from fairq import App, JobState
from fairq.app.periodic import Schedule
from fairq.contract import AckManyParams, DequeueParams
from fairq.errors import ConfigError, JobArgumentsError
from fairq.worker.periodic import PeriodicScheduler

T0 = 1_800_000_000.0  # a multiple of 300: a tick of "*/5 * * * *"
FIVE = 300.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite"])
def make_app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], App]]:
    """Apps sharing one store (each plays a worker process), on one clock."""
    clock = Clock()
    made: list[App] = []

    def make() -> App:
        if request.param == "memory":
            backend = made[0].backend if made else None
            app = App("memory://", backend=backend, clock=clock)
        else:
            app = App(f"sqlite:///{tmp_path}/q.db", clock=clock)

        @app.periodic("*/5 * * * *", tenant="acme", args=["daily"])
        @app.job()
        def report(kind: str) -> None: ...

        made.append(app)
        return app

    yield make
    for app in made:
        app.close()


def scheduler(app: App) -> PeriodicScheduler:
    return PeriodicScheduler(app, list(app.schedules.values()), clock=app.clock)


def at(app: App, now: float) -> None:
    app.clock.now = now  # type: ignore[attr-defined]


def the_schedule(app: App) -> Schedule:
    (schedule,) = app.schedules.values()
    return schedule


def finish_all(app: App) -> None:
    leases = app.backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=app.clock(), limit=100)
    ).leases
    app.backend.ack_many(AckManyParams(tokens=[lease.token for lease in leases], now=app.clock()))


def test_each_tick_is_enqueued_once(make_app: Callable[[], App]) -> None:
    app = make_app()
    run = scheduler(app)
    at(app, T0 + 1)
    (fired,) = run.run_once()
    schedule = the_schedule(app)
    assert (fired.tick, fired.job_id, fired.stored) == (T0, schedule.job_id(T0), True)
    info = app.job_info(schedule.job_id(T0))
    assert info is not None and (info.tenant, info.state) == ("acme", JobState.READY)
    assert info.payload == '{"args":["daily"],"kwargs":{}}'
    at(app, T0 + FIVE - 1)
    assert run.run_once() == []
    at(app, T0 + FIVE)
    assert [f.tick for f in run.run_once()] == [T0 + FIVE]
    assert run.next_due(T0 + FIVE) == T0 + 2 * FIVE


def test_many_schedulers_store_one_job_per_tick(make_app: Callable[[], App]) -> None:
    apps = [make_app() for _ in range(3)]
    runs = [scheduler(app) for app in apps]
    at(apps[0], T0)
    fired = [f for run in runs for f in run.run_once()]
    assert len({f.job_id for f in fired}) == 1
    assert [f.stored for f in fired] == [True, False, False]
    assert sum(s.ready for s in apps[0].stats()) == 1


def test_a_late_scheduler_does_not_enqueue_a_finished_tick_again(
    make_app: Callable[[], App],
) -> None:
    first, late = make_app(), make_app()
    at(first, T0)
    scheduler(first).run_once()
    finish_all(first)
    at(first, T0 + FIVE - 1)  # still the latest tick, within its grace
    (fired,) = scheduler(late).run_once()
    assert (fired.stored, fired.job_id) == (False, the_schedule(first).job_id(T0))
    assert sum(s.ready for s in first.stats()) == 0


def test_ticks_missed_while_running_are_dropped_and_counted(
    make_app: Callable[[], App], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()
    run = scheduler(app)
    at(app, T0)
    run.run_once()
    at(app, T0 + 3 * FIVE + 10)  # the thread stalled: two ticks came and went
    with caplog.at_level(logging.WARNING, logger="fairq.worker"):
        (fired,) = run.run_once()
    assert (fired.tick, fired.stored, fired.missed) == (T0 + 3 * FIVE, True, 2)
    (line,) = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert "2 tick(s)" in line and "2027-01-15T08:05:00" in line


def test_ticks_another_scheduler_enqueued_are_not_missed(make_app: Callable[[], App]) -> None:
    one, other = make_app(), make_app()
    run = scheduler(one)
    at(one, T0)
    run.run_once()
    for n in (1, 2):
        at(one, T0 + n * FIVE)
        scheduler(other).run_once()
    at(one, T0 + 3 * FIVE)
    (fired,) = run.run_once()
    assert fired.missed == 0


def test_after_downtime_only_the_latest_tick_runs(
    make_app: Callable[[], App], caplog: pytest.LogCaptureFixture
) -> None:
    """At start, the ticks after the last one stored are dropped and counted; the latest runs."""
    before, after = make_app(), make_app()
    at(before, T0)
    scheduler(before).run_once()
    at(before, T0 + 10 * FIVE + 30)  # down for nine ticks
    with caplog.at_level(logging.WARNING, logger="fairq.worker"):
        (fired,) = scheduler(after).run_once()
    assert (fired.tick, fired.stored, fired.missed) == (T0 + 10 * FIVE, True, 9)
    assert any("9 tick(s)" in r.getMessage() for r in caplog.records)
    assert sum(s.ready for s in after.stats()) == 2  # the first tick's and the latest's


def test_a_new_schedule_starts_with_its_next_tick_not_a_late_one(
    make_app: Callable[[], App],
) -> None:
    """A first deploy well after a tick (no job of the schedule stored) does not run it at once,
    though it is within its grace; a schedule with history does (a restart after downtime)."""
    new, restarted = make_app(), make_app()
    at(new, T0 + 2 * 60)
    (fired,) = scheduler(new).run_once()
    assert (fired.tick, fired.job_id, fired.stored, fired.missed) == (T0, None, False, 0)
    assert sum(s.ready for s in new.stats()) == 0
    at(new, T0 + FIVE)
    (fired,) = scheduler(new).run_once()  # its next tick, on time: enqueued
    assert (fired.tick, fired.stored) == (T0 + FIVE, True)
    at(new, T0 + 2 * FIVE + 2 * 60)  # late again, but the schedule has a job stored now
    (fired,) = scheduler(restarted).run_once()
    assert (fired.tick, fired.stored) == (T0 + 2 * FIVE, True)


def test_a_tick_older_than_its_grace_is_dropped(make_app: Callable[[], App]) -> None:
    app = make_app()
    (schedule,) = app.schedules.values()
    app.schedules = {
        schedule.name: Schedule(**{**schedule.__dict__, "misfire_grace": 60.0}),
    }
    run = scheduler(app)
    at(app, T0)
    run.run_once()
    at(app, T0 + FIVE + 61)
    (fired,) = run.run_once()
    assert (fired.tick, fired.job_id, fired.stored, fired.missed) == (T0 + FIVE, None, False, 1)
    at(app, T0 + 2 * FIVE + 60)
    (fired,) = run.run_once()
    assert (fired.tick, fired.stored, fired.missed) == (T0 + 2 * FIVE, True, 0)
    assert sum(s.ready for s in app.stats()) == 2


def test_a_new_schedule_past_its_grace_at_start_warns_of_no_missed_tick(
    make_app: Callable[[], App], caplog: pytest.LogCaptureFixture
) -> None:
    """docs/periodic.md: a new schedule counts no missed tick; a worker that starts after its
    latest tick's grace says at INFO that it starts with the next one (no WARNING)."""
    app = make_app()
    (schedule,) = app.schedules.values()
    app.schedules = {schedule.name: Schedule(**{**schedule.__dict__, "misfire_grace": 60.0})}
    at(app, T0 + 61)
    with caplog.at_level(logging.INFO, logger="fairq.worker"):
        (fired,) = scheduler(app).run_once()
    assert (fired.tick, fired.job_id, fired.stored, fired.missed) == (T0, None, False, 0)
    assert [r.levelname for r in caplog.records if r.name == "fairq.worker"] == ["INFO"]
    assert getattr(caplog.records[-1], "action", None) == "periodic_new"


def test_a_failed_enqueue_is_tried_again(make_app: Callable[[], App]) -> None:
    app = make_app()
    run = scheduler(app)
    at(app, T0)
    name, definition = app.jobs.popitem()
    assert run.run_once() == []  # the job is unknown here now: an error, logged
    app.jobs[name] = definition
    (fired,) = run.run_once()
    assert (fired.tick, fired.stored) == (T0, True)


def test_timezones_and_seconds() -> None:
    app = App("memory://")

    @app.job(tenant="account")
    def ping(account: str) -> None: ...

    (berlin,) = app.schedule(ping, cron="0 9 * * *", tenants=["a"], timezone="Europe/Berlin")
    summer = datetime(2025, 7, 1, 12, tzinfo=timezone.utc).timestamp()
    assert berlin.latest(summer) == datetime(2025, 7, 1, 7, tzinfo=timezone.utc).timestamp()
    (fast,) = app.schedule(ping, cron="* * * * * */10", tenants=["b"], name="fast")
    assert fast.latest(T0 + 25) == T0 + 20
    assert fast.grace(T0 + 20) == 10.0
    assert fast.unique(T0).window == 70.0


def test_several_tenants_get_a_schedule_each() -> None:
    app = App("memory://")

    @app.job(tenant="account")
    def ping(account: str) -> None: ...

    found = app.schedule(ping, cron="*/5 * * * *", tenants=["a", "b"])
    names = [(f"{ping.name}[a]", "a"), (f"{ping.name}[b]", "b")]
    assert [(s.name, s.tenant) for s in found] == names
    assert found[0].job_id(T0) != found[1].job_id(T0)


def test_schedule_and_periodic_take_tenant_or_tenants_alike() -> None:
    """docs/periodic.md: ``tenants`` (or ``tenant``), and each takes the other's settings."""
    app = App("memory://")

    @app.periodic("*/5 * * * *", tenants=["a", "b"])
    @app.job(tenant="account")
    def ping(account: str) -> None: ...

    (one,) = app.schedule(ping, cron="* * * * *", tenant="c", name="one")
    assert sorted(s.tenant for s in app.schedules.values()) == ["a", "b", "c"]
    assert dict(one.kwargs) == {"account": "c"}
    with pytest.raises(ConfigError, match="give tenant=… or tenants=\\[…\\], not both"):
        app.schedule(ping, cron="* * * * *", tenant="d", tenants=["e"], name="two")
    assert "two" not in app.schedules


def test_the_tenant_comes_from_the_arguments_or_the_fallback() -> None:
    app = App("memory://", fallback_tenant="system")

    @app.job(tenant="account")
    def ping(account: str) -> None: ...

    @app.job()
    def tidy() -> None: ...

    assert app.schedule(ping, cron="* * * * *", args=["acme"])[0].tenant == "acme"
    assert app.schedule(tidy, cron="* * * * *")[0].tenant == "system"
    # with tenants, the argument the tenant rule reads is the schedule's tenant
    (each,) = app.schedule(ping, cron="* * * * *", tenants=["globex"], name="each")
    assert (each.tenant, dict(each.kwargs)) == ("globex", {"account": "globex"})
    app.fallback_tenant = None
    with pytest.raises(ConfigError, match="has no tenant: pass tenant="):
        app.schedule(tidy, cron="* * * * *", name="tidy-again")


@pytest.mark.parametrize(
    ("settings", "error", "problem"),
    [
        ({"cron": "* * *"}, ConfigError, "has 3 fields; give five"),
        ({"cron": "61 * * * *"}, ConfigError, "is not a valid cron expression"),
        ({"cron": "* * * * * * *"}, ConfigError, "has 7 fields"),
        ({"cron": 5}, ConfigError, "must be a cron expression"),
        ({"cron": "0 0 30 2 *"}, ConfigError, "is not a valid cron expression"),
        ({"misfire_grace": 0}, ConfigError, "misfire_grace must be more than 0"),
        ({"misfire_grace": "1m"}, ConfigError, "misfire_grace must be a number of seconds"),
        ({"timezone": "Mars/Olympus"}, ConfigError, "not a known time zone"),
        ({"tenants": []}, ConfigError, "tenants must be a non-empty list"),
        ({"args": ["x", "y"]}, JobArgumentsError, "arguments do not fit"),
        ({"args": [{1: "x"}]}, JobArgumentsError, "dict key 1"),
        ({"tenants": ["a", "a"]}, ConfigError, "repeat a tenant"),
        ({"kwargs": "account=a"}, ConfigError, "kwargs must be a dict"),
        ({"kwargs": [("account", "a")]}, ConfigError, "kwargs must be a dict"),
        ({"kwargs": {"acount": "a"}}, JobArgumentsError, "unexpected keyword argument 'acount'"),
    ],
)
def test_bad_schedules_are_refused(settings: dict[str, Any], error: type, problem: str) -> None:
    app = App("memory://")

    @app.job(tenant="account")
    def ping(account: str) -> None: ...

    given: dict[str, Any] = {"cron": "*/5 * * * *", "tenants": ["a"], **settings}
    with pytest.raises(error, match=problem):
        app.schedule(ping, **given)
    assert app.schedules == {}


def test_a_schedule_names_a_job_of_its_app_once() -> None:
    app, other = App("memory://"), App("memory://")

    @other.job(tenant="account")
    def elsewhere(account: str) -> None: ...

    @app.job(tenant="account")
    def ping(account: str) -> None: ...

    with pytest.raises(ConfigError, match="not a job declared on this App"):
        app.schedule(elsewhere, cron="* * * * *", tenants=["a"])
    with pytest.raises(ConfigError, match="not a job declared on this App"):
        app.schedule("nope", cron="* * * * *", tenants=["a"])
    with pytest.raises(ConfigError, match="not a job declared on this App"):
        app.schedule(lambda account: None, cron="* * * * *", tenants=["a"])  # type: ignore[arg-type]
    app.periodic("* * * * *", tenant="a")(ping)
    with pytest.raises(ConfigError, match="already declared; give this one another name"):
        app.periodic("*/2 * * * *", tenant="a")(ping)
    app.periodic("*/2 * * * *", tenant="a", name="ping-often")(ping)
    assert sorted(app.schedules) == sorted([ping.name, "ping-often"])


def test_a_window_of_the_declaration_does_not_change_the_tick_key() -> None:
    app = App("memory://", clock=Clock(T0))

    @app.periodic("*/5 * * * *", tenant="a", misfire_grace=timedelta(minutes=1))
    @app.job(tenant="account", unique_for=3600)
    def ping(account: str) -> None: ...

    (fired,) = scheduler(app).run_once()
    at(app, T0 + FIVE)
    assert [f.stored for f in [fired, *scheduler(app).run_once()]] == [True, True]


def test_without_croniter_a_schedule_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "croniter", None)  # as if it were not installed
    app = App("memory://")

    @app.job(tenant="account")
    def ping(account: str) -> None: ...

    with pytest.raises(ConfigError, match=r"pip install 'fairq\[cron\]'"):
        app.periodic("* * * * *", tenant="a")(ping)


def test_a_worker_runs_the_schedules_of_its_queues_unless_told_not_to() -> None:
    from fairq.worker import Worker

    app = App("memory://")

    @app.periodic("* * * * *", tenant="a")
    @app.job(queue="reports")
    def report() -> None: ...

    @app.periodic("* * * * *", tenant="a")
    @app.job(queue="other")
    def other() -> None: ...

    def names(worker: Worker) -> list[str]:
        return [s.name for s in worker._periodic().schedules]

    assert sorted(names(Worker(app))) == sorted([report.name, other.name])
    assert names(Worker(app, queues="reports")) == [report.name]
    assert names(Worker(app, periodic=False)) == []
    assert names(Worker(app, burst=True)) == []
    with pytest.raises(ConfigError, match="periodic must be True or False"):
        Worker(app, periodic="no")  # type: ignore[arg-type]
