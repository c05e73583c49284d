"""``fairq tenants`` and ``fairq queue``: read or change weights and caps while workers run.

Values are checked by click parameter types before the store is opened, so a bad value exits
with code 2 and changes nothing.
"""

from __future__ import annotations

import math

import click
from rich.table import Table

from fairq.app import App
from fairq.cli import cli
from fairq.cli.admin._common import (
    InputError,
    format_cap,
    open_app,
    out_console,
    reported_errors,
    safe_text,
    store_options,
)
from fairq.contract import KEEP, Keep, TenantStats
from fairq.policy.queues import check_queue_name


def parse_weight(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A positive finite number; anything else is a usage error (exit 2) before any change."""
    if value is None:
        return None
    try:
        weight = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number; give e.g. 1, 2.5 or 10") from None
    if not math.isfinite(weight) or weight <= 0:
        raise click.BadParameter(f"{value!r} must be a positive finite number (e.g. 1, 2.5, 10)")
    return weight


def parse_cap(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A whole number of at least 1, or ``none``. (Whether it was given is asked separately.)"""
    if value is None:
        return None
    text = value.strip()
    if text.lower() == "none":
        return None
    if not text.isdigit() or int(text) < 1:
        raise click.BadParameter(f"{value!r} is not a whole number of at least 1 (or 'none')")
    return int(text)


@cli.command(
    short_help="Show or change tenants' weights and caps.",
    epilog="""\b
Examples:
  fairq tenants imports                      # every tenant of queue "imports"
  fairq tenants imports acme                 # one tenant
  fairq tenants imports acme --weight 3      # acme gets 3 shares
  fairq tenants imports acme --max-running 2 # at most 2 of acme's jobs at once
  fairq tenants imports acme --reset         # back to the queue's defaults
""",
)
@click.argument("queue")
@click.argument("tenant", required=False)
@click.option(
    "--weight",
    metavar="W",
    callback=parse_weight,
    default=None,
    help="Share of the workers relative to other tenants (default 1).",
)
@click.option(
    "--max-running",
    "max_running",
    metavar="N|none",
    callback=parse_cap,
    default=None,
    help="At most N of this tenant's jobs run at once; 'none' follows the queue's "
    "default (set with `fairq queue`).",
)
@click.option("--reset", is_flag=True, help="Drop the tenant's own weight and cap.")
@store_options
def tenants(
    queue: str,
    tenant: str | None,
    weight: float | None,
    max_running: int | None,
    reset: bool,
    url: str | None,
    app_ref: str | None,
) -> None:
    """Show tenants of QUEUE, or change TENANT's weight or cap at run time.

    Changes apply to the next job handed out; no restart needed.
    """
    source = click.get_current_context().get_parameter_source
    cap_given = source("max_running") is not click.core.ParameterSource.DEFAULT
    changing = weight is not None or cap_given or reset
    if changing and tenant is None:
        raise InputError("name the TENANT to change, e.g. `fairq tenants imports acme --weight 2`")
    if reset and (weight is not None or cap_given):
        raise InputError("--reset cannot be combined with --weight or --max-running")
    new_weight: float | Keep | None = weight if weight is not None else KEEP
    new_cap: int | Keep | None = max_running if cap_given else KEEP
    if reset:
        new_weight, new_cap = None, None
    with reported_errors():
        app = open_app(url, app_ref)
        try:
            if changing:
                assert tenant is not None
                rows = [app.set_tenant(queue, tenant, weight=new_weight, max_running=new_cap)]
            else:
                rows = _existing(app, queue, tenant)
        finally:
            app.close()
    out_console().print(_table(queue, rows))


def _existing(app: App, queue: str, tenant: str | None) -> list[TenantStats]:
    rows = app.stats(queue=queue, tenant=tenant)
    if tenant is not None and not rows:
        raise InputError(f"queue {queue!r} has no tenant {tenant!r} yet")
    return rows


def _table(queue: str, rows: list[TenantStats]) -> Table:
    table = Table(title=f"tenants of queue {queue}", title_justify="left")
    for name in ("tenant", "weight", "cap", "ready", "running"):
        table.add_column(name, justify="left" if name == "tenant" else "right", no_wrap=True)
    for row in rows:
        table.add_row(
            safe_text(row.tenant, 60),
            f"{row.weight:g}",
            format_cap(row.max_running),
            str(row.ready),
            str(row.running),
        )
    return table


@cli.command(
    short_help="Show or set a queue's default weight and cap.",
    epilog="""\b
Examples:
  fairq queue imports                        # show the defaults
  fairq queue imports --max-running 4        # every tenant: at most 4 running at once
  fairq queue imports --weight 1 --max-running none
""",
)
@click.argument("queue")
@click.option(
    "--weight",
    metavar="W",
    callback=parse_weight,
    default=None,
    help="Default weight of tenants without their own.",
)
@click.option(
    "--max-running",
    "max_running",
    metavar="N|none",
    callback=parse_cap,
    default=None,
    help="Default per-tenant cap; 'none' for no cap.",
)
@store_options
def queue(
    queue: str, weight: float | None, max_running: int | None, url: str | None, app_ref: str | None
) -> None:
    """Show or set QUEUE's defaults: the weight and cap of every tenant without its own."""
    source = click.get_current_context().get_parameter_source
    cap_given = source("max_running") is not click.core.ParameterSource.DEFAULT
    with reported_errors():
        app = open_app(url, app_ref)
        try:
            current = app.backend.get_queue(check_queue_name(queue))
            if weight is not None or cap_given:
                app.set_queue(
                    queue,
                    weight=weight if weight is not None else current.weight,
                    max_running=max_running if cap_given else current.max_running,
                )
                current = app.backend.get_queue(queue)
        finally:
            app.close()
    out_console().print(
        f"queue {current.queue}: default weight {current.weight:g}, "
        f"default cap {format_cap(current.max_running)}",
        markup=False,
    )
