"""``fairq tenants`` and ``fairq queue``: read or change weights, caps and rates while workers run.

Values are checked by click parameter types before the store is opened, so a bad value exits
with code 2 and changes nothing.
"""

from __future__ import annotations

import click
from rich.table import Table

from fairq.app import App
from fairq.cli import cli
from fairq.cli.admin._common import (
    InputError,
    format_cap,
    new_queue_option,
    open_app,
    out_console,
    refuse_unseen_queue,
    reported_errors,
    safe_text,
    store_options,
)
from fairq.cli.admin.values import (
    NONE,
    given,
    parse_half_life,
    parse_pause_weight,
    parse_rate_text,
    parse_seconds,
    parse_weight,
    with_burst,
)
from fairq.cli.numbers import Whole
from fairq.contract import KEEP, GetQueueParams, Keep, TenantStats
from fairq.policy.bounds import MAX_INT
from fairq.policy.queues import check_queue_name
from fairq.policy.rate import Rate

RATE_HELP = "'100/minute', '5/s', '10/30s' (COUNT/UNIT: s, m, h, d)"


@cli.command(
    short_help="Show or change tenants' weights, caps and rates.",
    epilog="""\b
Examples:
  fairq tenants imports                        # every tenant of queue "imports"
  fairq tenants imports acme                   # one tenant
  fairq tenants imports acme --weight 3        # acme gets 3 shares
  fairq tenants imports acme --weight 0        # pause acme: its jobs wait, nothing is lost
  fairq tenants imports acme --max-running 2   # at most 2 of acme's jobs at once
  fairq tenants imports acme --rate 100/minute --burst 10
  fairq tenants imports acme --rate none       # back to the queue's default rate
  fairq tenants imports acme --reset           # back to the queue's defaults
""",
)
@click.argument("queue")
@click.argument("tenant", required=False)
@click.option(
    "--weight",
    metavar="W",
    callback=parse_pause_weight,
    default=None,
    help="Share of the workers relative to other tenants (default 1); 0 pauses the tenant.",
)
@click.option(
    "--max-running",
    "max_running",
    metavar="N|none",
    type=Whole(none_ok=True),
    default=None,
    help="At most N of this tenant's jobs run at once; 'none' follows the queue's "
    "default (set with `fairq queue`).",
)
@click.option(
    "--rate",
    metavar="RATE|none",
    callback=parse_rate_text,
    default=None,
    help=f"At most this many job starts per period, e.g. {RATE_HELP}; 'none' follows the "
    "queue's default rate.",
)
@click.option(
    "--burst",
    type=Whole(1, MAX_INT),
    default=None,
    help="With --rate: how many may start back to back (default 1).",
)
@click.option("--reset", is_flag=True, help="Drop the tenant's own weight, cap and rate.")
@new_queue_option
@store_options
def tenants(
    queue: str,
    tenant: str | None,
    weight: float | None,
    max_running: int | None,
    rate: str | None,
    burst: int | None,
    reset: bool,
    new_queue: bool,
    url: str | None,
    app_ref: str | None,
) -> None:
    """Show tenants of QUEUE, or change TENANT's weight, cap or rate at run time.

    Changes apply to the next job handed out; no restart needed.
    """
    cap_given = given("max_running")
    new_rate = with_burst(rate, burst)
    changing = weight is not None or cap_given or rate is not None or reset
    if changing and tenant is None:
        raise InputError("name the TENANT to change, e.g. `fairq tenants imports acme --weight 2`")
    if reset and (weight is not None or cap_given or rate is not None):
        raise InputError("--reset cannot be combined with --weight, --max-running or --rate")
    new_weight: float | Keep | None = weight if weight is not None else KEEP
    new_cap: int | Keep | None = max_running if cap_given else KEEP
    if reset:
        new_weight, new_cap, new_rate = None, None, None
    with reported_errors():
        app = open_app(url, app_ref, existing=not changing)
        try:
            if changing:
                assert tenant is not None
                refuse_unseen_queue(app, queue, new_queue)
                changed = app.set_tenant(
                    queue, tenant, weight=new_weight, max_running=new_cap, rate=new_rate
                )
                rows = [changed]
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
    for name in ("tenant", "weight", "cap", "rate", "ready", "running"):
        table.add_column(name, justify="left" if name == "tenant" else "right", no_wrap=True)
    for row in rows:
        table.add_row(
            safe_text(row.tenant, 60),
            format_weight(row.weight),
            format_cap(row.max_running),
            format_rate(row.rate),
            str(row.ready),
            str(row.running),
        )
    return table


def format_weight(weight: float) -> str:
    return "0 (paused)" if weight == 0 else f"{weight:g}"


def format_rate(rate: Rate | None) -> str:
    return "none" if rate is None else str(rate)


@cli.command(
    short_help="Show or set a queue's defaults (weight, cap, rate, history) and its own cap.",
    epilog="""\b
Examples:
  fairq queue imports                        # show the settings
  fairq queue imports --max-running 4        # every tenant: at most 4 running at once
  fairq queue imports --rate 100/minute      # every tenant: at most 100 starts a minute
  fairq queue imports --max-in-flight 20     # all tenants together: at most 20 at once
  fairq queue imports --half-life 600 --max-debt 60
  fairq queue imports --weight 1 --max-running none --rate none --half-life none
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
    type=Whole(none_ok=True),
    default=None,
    help="Default per-tenant cap; 'none' for no cap.",
)
@click.option(
    "--rate",
    metavar="RATE|none",
    callback=parse_rate_text,
    default=None,
    help=f"Default per-tenant rate, e.g. {RATE_HELP}; 'none' for no limit.",
)
@click.option(
    "--burst",
    type=Whole(1, MAX_INT),
    default=None,
    help="With --rate: how many may start back to back (default 1).",
)
@click.option(
    "--half-life",
    "half_life",
    metavar="SECONDS|none",
    callback=parse_half_life,
    default=None,
    help="Remember each tenant's recent service, halving every SECONDS: a tenant that just "
    "had a big batch cools down before it gets a full share again. 'none': forget at once.",
)
@click.option(
    "--max-debt",
    "max_debt",
    metavar="SECONDS",
    callback=parse_seconds,
    default=None,
    help="With a half-life: the most recent service a returning tenant is held back by.",
)
@click.option(
    "--max-in-flight",
    "max_in_flight",
    metavar="N|none",
    type=Whole(none_ok=True),
    default=None,
    help="The queue's own cap: at most N of its jobs running at once, all tenants and "
    "workers together (the fair order is unchanged); 'none' for no cap.",
)
@new_queue_option
@store_options
def queue(
    queue: str,
    weight: float | None,
    max_running: int | None,
    rate: str | None,
    burst: int | None,
    half_life: float | str | None,
    max_debt: float | None,
    max_in_flight: int | None,
    new_queue: bool,
    url: str | None,
    app_ref: str | None,
) -> None:
    """Show or set QUEUE's defaults: the weight, cap and rate of every tenant without its own,
    its history (half-life, max debt), and its own cap on jobs in flight."""
    new_weight = KEEP if weight is None else weight
    new_cap = max_running if given("max_running") else KEEP
    new_rate = with_burst(rate, burst)
    new_half_life = _half_life(half_life)
    new_max_debt = KEEP if max_debt is None else max_debt
    new_in_flight = max_in_flight if given("max_in_flight") else KEEP
    changes = (new_weight, new_cap, new_rate, new_half_life, new_max_debt, new_in_flight)
    with reported_errors():
        app = open_app(url, app_ref)
        try:
            check_queue_name(queue)
            if any(not isinstance(value, Keep) for value in changes):
                refuse_unseen_queue(app, queue, new_queue)
                app.set_queue(  # only the settings given change
                    queue, weight=new_weight, max_running=new_cap, rate=new_rate,
                    half_life=new_half_life, max_debt=new_max_debt, max_in_flight=new_in_flight,
                )  # fmt: skip
            current = app.backend.get_queue(GetQueueParams(queue=queue))
        finally:
            app.close()
    half = "none" if current.half_life is None else f"{current.half_life:g} s"
    out_console().print(
        f"queue {current.queue}: default weight {current.weight:g}, "
        f"default cap {format_cap(current.max_running)}, "
        f"default rate {format_rate(current.rate)}, half-life {half}, "
        f"max debt {current.max_debt:g} s, max in flight {format_cap(current.max_in_flight)}",
        markup=False,
    )


def _half_life(given_value: float | str | None) -> float | Keep | None:
    if given_value is None:
        return KEEP
    return None if given_value == NONE else float(given_value)
