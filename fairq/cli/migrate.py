"""``fairq migrate``: create or upgrade fairq's tables in a PostgreSQL schema.

Run it as a role that may create the schema (usually at deploy time); workers and producers
can then connect with ``?migrate=false`` as a role with only read/write rights.
"""

from __future__ import annotations

import click

from fairq.backends import needs_extra
from fairq.cli import cli
from fairq.errors import ConfigError, FairqError


@cli.command(
    short_help="Create or upgrade fairq's PostgreSQL schema.",
    epilog="""\b
Examples:
  fairq migrate --url postgresql://app@db.internal/app
  fairq migrate --url postgresql://app@db.internal/app --schema jobs
""",
)
@click.option(
    "--url",
    envvar="FAIRQ_URL",
    show_envvar=True,
    required=True,
    metavar="URL",
    help="The PostgreSQL store, e.g. postgresql://user@host:5432/db.",
)
@click.option(
    "--schema",
    default=None,
    metavar="NAME",
    help="The schema that holds fairq's tables. Default: the URL's ?schema=, else fairq.",
)
def migrate(url: str, schema: str | None) -> None:
    """Apply every migration this fairq has that the schema lacks, in one transaction."""
    try:
        with needs_extra("postgresql"):
            from fairq.backends.postgres.migrate import migrate as apply
            from fairq.backends.postgres.sql import latest_version
            from fairq.backends.postgres.url import parse_url

        parsed = parse_url(url, schema=schema)
        applied = apply(parsed)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except FairqError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    where = f"schema {parsed.schema!r} at {parsed.display}"
    if applied:
        versions = ", ".join(str(v) for v in applied)
        click.echo(f"applied migration(s) {versions} to {where}; now at version {latest_version()}")
    else:
        click.echo(f"{where} is up to date (version {latest_version()})")
