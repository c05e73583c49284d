"""A queue name nobody knows (the App does not declare it, the store has never seen it) is most
likely a typo: a change to it is refused unless ``--new-queue`` says it is meant, and a worker
told to serve it says so (and serves it: it may be a queue whose first job is yet to come)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click.testing
import pytest
from cli_store import Store

import fairq.cli.admin  # noqa: F401
from fairq.cli import cli
from fairq.contract import GetQueueParams, QueueSettings

TYPO = "queue 'dmo' is not declared by the app and the store has never seen it"


@pytest.mark.parametrize(
    "command",
    [["tenants", "dmo", "acme", "--weight", "2"], ["queue", "dmo", "--max-running", "2"]],
    ids=["tenants", "queue"],
)
def test_a_change_to_a_queue_nobody_knows_is_refused_naming_the_known_ones(
    store: Store, command: list[str]
) -> None:
    before = store.snapshot()
    result = store.run(*command)
    assert result.exit_code == 2, result.output
    assert TYPO in result.stderr
    assert "(known: bench, demo; did you mean 'demo'?)" in result.stderr
    assert "nothing was changed: pass --new-queue" in result.stderr
    assert store.snapshot() == before
    assert store.app.backend.get_queue(GetQueueParams(queue="dmo")) == QueueSettings(queue="dmo")


def test_new_queue_sets_it_anyway(store: Store) -> None:
    result = store.run("tenants", "imports", "acme", "--weight", "2", "--new-queue")
    assert result.exit_code == 0, result.output
    assert [(r.queue, r.tenant, r.weight) for r in store.app.stats(queue="imports")] == [
        ("imports", "acme", 2.0)
    ]
    assert store.run("tenants", "imports", "globex", "--weight", "3").exit_code == 0  # seen now


def test_a_queue_the_store_has_seen_needs_no_flag(store: Store) -> None:
    store.enqueue("acme", queue="elsewhere")  # a job homed elsewhere, sent there by options
    assert store.run("queue", "elsewhere", "--max-running", "2").exit_code == 0
    assert store.app.backend.get_queue(GetQueueParams(queue="elsewhere")).max_running == 2


def test_a_refused_change_in_a_directory_without_a_store_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FAIRQ_URL", raising=False)
    result = click.testing.CliRunner().invoke(
        cli, ["tenants", "nosuchqueue", "42", "--weight", "2"]
    )
    assert result.exit_code == 2
    assert "queue 'nosuchqueue' is not declared" in result.stderr
    assert list(tmp_path.iterdir()) == []


def _worker(url: str, queues: str) -> str:
    command = [sys.executable, "-m", "fairq", "worker", "fairq.demo.jobs:app", "--url", url]
    done = subprocess.run(
        [*command, "--queues", queues, "--burst"],
        capture_output=True, text=True, timeout=120, check=False, env=os.environ,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.processes
def test_a_worker_told_to_serve_a_queue_nobody_knows_warns_and_serves_it(store: Store) -> None:
    logged = _worker(store.url, "nosuch,demo,elsewhere")
    warnings = [line for line in logged.splitlines() if " WARNING " in line]
    assert len(warnings) == 1, logged
    assert (
        "queue 'nosuch' is not declared by the app and the store has never seen it" in (warnings[0])
    )
    assert "known: bench, demo" in warnings[0]
    assert "serving it anyway" in warnings[0]
    assert "queues nosuch,demo,elsewhere" in logged
    store.enqueue("acme", queue="elsewhere")
    assert " WARNING " not in _worker(store.url, "demo,elsewhere")  # declared, or seen
