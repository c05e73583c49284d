"""Every command explains itself, with an example, to someone who has never seen fairq."""

from __future__ import annotations

import click.testing
import pytest

import fairq.cli.admin
import fairq.cli.demo  # noqa: F401
from fairq.cli import cli

COMMANDS = [
    ["enqueue"],
    ["stats"],
    ["tenants"],
    ["queue"],
    ["dead"],
    ["dead", "list"],
    ["dead", "requeue"],
    ["cancel"],
    ["demo"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_has_a_summary_and_an_example(command: list[str]) -> None:
    result = click.testing.CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output
    assert "Example" in result.output
    assert f"fairq {' '.join(command)}" in result.output.split("Example", 1)[1]


def test_top_level_help_lists_the_admin_commands() -> None:
    output = click.testing.CliRunner().invoke(cli, ["--help"]).output
    for name in ("enqueue", "stats", "tenants", "queue", "dead", "cancel", "demo"):
        assert name in output
