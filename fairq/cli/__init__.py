"""The ``fairq`` command. Each sub-command lives in its own module and registers itself here."""

from __future__ import annotations

import logging

import click

from fairq import __version__
from fairq.startup import release

#: The commands that handle SIGTERM and Ctrl-C themselves, from the moment the process starts
#: (fairq/startup.py); the others get Python's own handling back.
LONG_RUNNING = frozenset({"worker", "relay", "dashboard"})
LEVELS = ["debug", "info", "warning", "error"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="fairq")
@click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="How much fairq logs (to stderr).",
)
@click.option(
    "--library-log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    help="How much the libraries fairq uses log (redis-py, psycopg, …): their debug lines are "
    "not fairq's, so --log-level debug leaves them out unless this asks for them too.",
)
@click.pass_context
def cli(ctx: click.Context, log_level: str, library_log_level: str) -> None:
    """fairq: fair multi-tenant background jobs.

    Jobs go into per-tenant queues; a weighted fair scheduler hands workers the next job, so one
    tenant's flood never makes the others wait. The store is $FAIRQ_URL, or fairq.db here.

    Start with `fairq demo` to see the difference against a plain FIFO queue.
    """
    if ctx.invoked_subcommand not in LONG_RUNNING:
        release()
    if logging.getLogger().handlers:  # logging is set up already (a program embedding us)
        return
    logging.basicConfig(
        level=library_log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("fairq").setLevel(log_level.upper())


def main() -> None:
    from fairq.cli import (  # noqa: F401  (each registers its commands)
        admin,
        dashboard,
        demo,
        migrate,
        relay,
        simulate,
        worker,
    )

    cli(prog_name="fairq")
