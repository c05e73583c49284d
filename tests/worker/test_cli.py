"""``fairq worker`` argument checking, in-process (nothing here starts a worker)."""

from __future__ import annotations

import click.testing
import pytest

import fairq.cli.worker  # noqa: F401  (registers the command)
from fairq.cli import cli


def run(*args: str) -> click.testing.Result:
    return click.testing.CliRunner().invoke(cli, ["worker", *args])


def test_help_explains_app_and_shows_examples() -> None:
    result = run("--help")
    assert result.exit_code == 0
    assert "module:attribute" in result.output
    assert "fairq worker myproject.jobs:app --queues reports:3,default:1" in result.output


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.worker.apps", "must look like 'package.module:attribute'"),
        (":app", "must look like 'package.module:attribute'"),
        ("no_such_module_xyz:app", "cannot import module 'no_such_module_xyz'"),
        ("tests.worker.no_such:app", "no module named 'tests.worker.no_such'"),
        ("tests.worker.apps:nope", "has no attribute 'nope'"),
        ("tests.worker.apps:make_app", "is a function, not a fairq App"),
    ],
)
def test_bad_app_specs_are_clear(spec: str, message: str) -> None:
    result = run(spec)
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        ("reports:x", "queue weight in 'reports:x' is not a number"),
        ("critical,,default:6", "empty queue name"),
        ("critical, default:6, slow:0", "queue weight in 'slow:0' must be a positive number"),
        ("critical, default:-6", "must be a positive number"),
        ("critical, default:6, critical", "queue 'critical' appears twice"),
        ("critical, de fault:6", "queue name 'de fault' is invalid"),
    ],
)
def test_bad_queues_are_clear(queues: str, message: str) -> None:
    result = run("tests.worker.apps:app", "--queues", queues)
    assert result.exit_code == 2
    assert message in result.output


def test_processes_need_a_shared_store() -> None:
    result = run("tests.worker.apps:app", "--url", "memory://", "--processes", "2")
    assert result.exit_code == 2
    assert "memory://" in result.output
