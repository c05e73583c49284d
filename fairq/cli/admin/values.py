"""Click callbacks that read the admin commands' values: each refuses bad input with exit 2.

They run before the store is opened, so a refused value has changed nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import click

from fairq.contract import KEEP, Keep
from fairq.errors import ConfigError
from fairq.policy.bounds import check_seconds, check_weight
from fairq.policy.rate import Rate

NONE = "none"


def given(name: str) -> bool:
    """Whether the option was given on the command line (``none`` is a value, not absence)."""
    source = click.get_current_context().get_parameter_source(name)
    return source is not click.core.ParameterSource.DEFAULT


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number; give e.g. 1, 2.5 or 10") from None


def _checked(check: Callable[[float], float], value: str) -> float:
    """Read a number, then let fairq's own check refuse it with fairq's own message."""
    try:
        return check(_number(value))
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


def parse_weight(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A positive finite number (a queue's default weight)."""
    return None if value is None else _checked(check_weight, value)


def parse_pause_weight(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> float | None:
    """A tenant's weight: 0 (paused) or a positive finite number."""
    return None if value is None else _checked(partial(check_weight, paused_ok=True), value)


def parse_rate_text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A rate such as ``100/minute``, or ``none``; checked now, built with its burst later."""
    if value is None:
        return None
    if value.strip().lower() == NONE:
        return NONE
    try:
        Rate.parse(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def with_burst(rate: str | None, burst: int | None) -> Rate | Keep | None:
    """The rate to store: KEEP when not given, None for ``none``, else the parsed rate."""
    if burst is not None and (rate is None or rate == NONE):
        raise click.UsageError("--burst needs a --rate to apply to, e.g. --rate 100/minute")
    if rate is None:
        return KEEP
    if rate == NONE:
        return None
    try:
        return Rate.parse(rate, burst if burst is not None else 1)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def parse_seconds(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A positive finite number of seconds."""
    if value is None:
        return None
    return _checked(partial(check_seconds, param.name or "seconds"), value)


def parse_half_life(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> float | str | None:
    """Seconds (positive), or ``none`` to turn history off."""
    if value is not None and value.strip().lower() == NONE:
        return NONE
    return parse_seconds(ctx, param, value)
