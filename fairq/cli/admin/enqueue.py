"""``fairq enqueue``: put one job on a queue by name, from a shell or a script."""

from __future__ import annotations

import json
import math
from typing import Any

import click

from fairq.app import Call, Options
from fairq.cli import cli
from fairq.cli.admin._common import InputError, open_app, reported_errors, store_options
from fairq.cli.numbers import Whole
from fairq.errors import MissingTenant
from fairq.policy.bounds import MAX_INT


@cli.command(
    epilog="""\b
Examples:
  fairq enqueue reports.build '["2024-06"]' --tenant acme
  fairq enqueue imports.csv --kwargs '{"account_id": "acme", "path": "s3://b/f.csv"}'
  fairq enqueue emails.send '[42]' --tenant acme --queue slow --delay 60
"""
)
@click.argument("name")
@click.argument("args_json", required=False, default="[]", metavar="[ARGS_JSON]")
@click.option(
    "--kwargs",
    "kwargs_json",
    default="{}",
    metavar="JSON",
    help="Keyword arguments as a JSON object.",
)
@click.option(
    "--tenant",
    default=None,
    help="Whom the job is for. Needed unless the job declares its tenant argument.",
)
@click.option("--queue", default=None, help="Override the job's declared queue.")
@click.option(
    "--delay",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Run no earlier than this many seconds from now.",
)
@click.option(
    "--priority",
    type=Whole(-MAX_INT - 1, MAX_INT),
    default=0,
    show_default=True,
    help="Higher runs first among the same tenant's jobs.",
)
@store_options
def enqueue(
    name: str,
    args_json: str,
    kwargs_json: str,
    tenant: str | None,
    queue: str | None,
    delay: float | None,
    priority: int,
    url: str | None,
    app_ref: str | None,
) -> None:
    """Enqueue job NAME with JSON arguments; prints the new job's id.

    ARGS_JSON is a JSON array of positional arguments (default: none). The job must be declared
    in --app, or published to the store by a worker that runs it.
    """
    args = _parse_json(args_json, list, "ARGS_JSON", "a JSON array, e.g. '[1, \"x\"]'")
    kwargs = _parse_json(kwargs_json, dict, "--kwargs", "a JSON object, e.g. '{\"n\": 1}'")
    if delay is not None and not (math.isfinite(delay) and delay >= 0):
        raise InputError(f"--delay must be a non-negative number of seconds, got {delay}")
    options = Options(tenant=tenant, queue=queue, delay=delay, priority=priority)
    with reported_errors():
        app = open_app(url, app_ref)
        try:
            job_id = app.enqueue_many([Call(name, tuple(args), kwargs, options)])[0]
        except MissingTenant as exc:
            raise InputError(
                f"{str(exc).split(': pass ')[0]}: pass --tenant TENANT, or the job's tenant "
                "argument in ARGS_JSON or --kwargs"
            ) from None
        finally:
            app.close()
    click.echo(job_id)


def _parse_json(text: str, kind: type, label: str, expected: str) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{label} is not valid JSON ({exc.msg} at column {exc.colno}): expected {expected}"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number of over 4,300 digits, deep nesting
        raise InputError(
            f"{label} cannot be read: {str(exc).split(';')[0]}; pass such a value as a string"
        ) from None
    if not isinstance(value, kind):
        raise InputError(f"{label} must be {expected}; got a JSON {type(value).__name__}")
    return value
