"""``fairq stats --app``: the app's periodic jobs, their next tick and their last tick's job."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click.testing

import fairq.cli.admin  # noqa: F401
from fairq.cli import cli
from fairq.cli.loader import load_app, rebind
from fairq.worker.periodic import PeriodicScheduler

APP = "tests.worker.periodic_app:app"


def run(*args: str) -> click.testing.Result:
    return click.testing.CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_stats_shows_each_schedule_and_its_last_tick(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    app = rebind(load_app(APP), url)
    try:
        (fired,) = PeriodicScheduler(app, list(app.schedules.values()), clock=time.time).run_once()
    finally:
        app.close()
    doc = json.loads(run("stats", "--app", APP, "--url", url, "--json").stdout)
    (row,) = doc["periodic"]
    assert (row["name"], row["cron"], row["tenant"], row["queue"]) == (
        "tick", "* * * * * *", "acme", "default",
    )  # fmt: skip
    assert (row["last_tick"], row["last_job_id"], row["last_state"]) == (
        fired.tick, fired.job_id, "ready",
    )  # fmt: skip
    assert 0 < row["next_in"] <= 1.0
    table = run("stats", "--app", APP, "--url", url).stdout
    assert "periodic" in table and fired.job_id in table and "* * * * * *" in table
    other = json.loads(run("stats", "--app", APP, "--url", url, "--tenant", "zz", "--json").stdout)
    assert other["periodic"] == []


def test_a_schedule_without_a_tick_yet_and_no_app_no_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    app = rebind(load_app(APP), url)
    app.publish()  # the store exists; no tick was enqueued
    app.close()
    (row,) = json.loads(run("stats", "--app", APP, "--url", url, "--json").stdout)["periodic"]
    assert (row["last_tick"], row["last_job_id"], row["last_state"]) == (None, None, None)
    assert json.loads(run("stats", "--url", url, "--json").stdout)["periodic"] == []
