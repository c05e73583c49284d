"""What every store can hold, checked once before any store is reached.

The stores disagree at the edges (PostgreSQL's ``integer`` is 32 bits, SQLite's 64, Redis keeps
a double; PostgreSQL's text refuses NUL), so fairq allows only what all of them hold alike and
says so at the call that gave the value, with the fix. Durations are seconds, or a ``timedelta``,
converted here and nowhere else.
"""

from __future__ import annotations

import math
from datetime import timedelta

from fairq.errors import ConfigError, InvalidTenant, MissingTenant

#: Integer settings (caps, rate counts and bursts, attempts, priorities) fit a 32-bit column.
MAX_INT = 2**31 - 1
#: Weights: a 10^12 range, so cost/weight stays a finite double that tags can be ordered by.
MIN_WEIGHT = 1e-6
MAX_WEIGHT = 1e6
#: The longest duration a setting takes (a lease, a cost estimate, a half-life): 366 days.
MAX_SECONDS = 366 * 86400.0
MAX_TENANT_CHARS = 65_536


def check_int(label: str, value: object, *, least: int = 1) -> int:
    """A whole number from ``least`` to ``MAX_INT``."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_INT:
        raise ConfigError(
            f"{label} must be a whole number from {least} to {MAX_INT:,} (2**31 - 1, what every "
            f"store holds), got {_short(value)}"
        )
    return value


def read_int(text: str, label: str = "", *, least: int = 1, most: int = MAX_INT) -> int:
    """A whole number typed as text (a form field, a query parameter, a CLI option), from
    ``least`` to ``most``: ASCII digits, a leading ``-`` only where ``least`` is negative,
    spaces around ignored. The one reader of such text: ``str.isdigit`` is true of ``²`` and
    ``①``, which ``int`` refuses, and ``int`` reads ``١٢``, ``1_000`` and ``+7``, which nobody
    means to type; neither alone says what a person may write. ``label`` starts the message."""
    where = f"{label}: " if label else ""
    span = f"from {least:,} to {most:,}"
    body = text.strip() if isinstance(text, str) else ""
    digits = body[1:] if body.startswith("-") and least < 0 else body
    if not (digits.isascii() and digits.isdigit()):
        example = max(least, min(most, 2))
        raise ConfigError(
            f"{where}{_short(text)} is not a whole number {span}; write it in the digits 0-9, "
            f"e.g. {example}"
        )
    significant = digits.lstrip("0")
    if len(significant) > len(str(max(most, -least))):
        bound = f"below {least:,}" if body.startswith("-") else f"over {most:,}"
        raise ConfigError(f"{where}a number of {len(significant)} digits is {bound}")
    value = int(body)
    if not least <= value <= most:
        raise ConfigError(f"{where}{value:,} is out of range: give a whole number {span}")
    return value


def check_weight(weight: object, *, paused_ok: bool = False, label: str = "weight") -> float:
    """A weight from ``MIN_WEIGHT`` to ``MAX_WEIGHT``; 0 (paused) too where ``paused_ok``."""
    least = "0 (paused), or" if paused_ok else "a number"
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ConfigError(
            f"{label} must be {least} from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}, got {_short(weight)}"
        )
    if weight == 0 and paused_ok:
        return 0.0
    if not (math.isfinite(weight) and MIN_WEIGHT <= weight <= MAX_WEIGHT):
        raise ConfigError(
            f"{label} must be {least} from {MIN_WEIGHT:g} to {MAX_WEIGHT:g} (weights are "
            f"relative: scale them all down), got {_short(weight)}"
        )
    return float(weight)


def seconds(label: str, value: object) -> float:
    """A duration as float seconds: a number or a ``timedelta``; ConfigError for anything else."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            f"{label} must be a number of seconds or a datetime.timedelta, got {_short(value)}"
        )
    return float(value)


def check_seconds(label: str, value: object, *, most: float = MAX_SECONDS) -> float:
    """A positive duration of at most ``most`` seconds (366 days unless said)."""
    duration = seconds(label, value)
    if not (0 < duration <= most):
        raise ConfigError(
            f"{label} must be more than 0 and at most {most / 86400:g} days ({most:g} s), "
            f"got {_short(value)}"
        )
    return duration


def check_tenant(tenant: object) -> str:
    """A tenant id as stored: a non-empty str (an int becomes its decimal text) that every
    store keeps as given: valid Unicode, no NUL, at most ``MAX_TENANT_CHARS`` characters."""
    if isinstance(tenant, bool) or not isinstance(tenant, (str, int)):
        raise InvalidTenant(
            f"tenant must be a str (or an int, stored as its decimal text), got {_short(tenant)}"
        )
    if isinstance(tenant, int) and tenant.bit_length() > 64:
        raise InvalidTenant(f"an int tenant id must fit in 64 bits, got {_short(tenant)}")
    text = str(tenant)
    if text == "":
        raise MissingTenant("tenant must not be empty")
    if len(text) > MAX_TENANT_CHARS:
        raise InvalidTenant(f"tenant id is {len(text)} characters, over {MAX_TENANT_CHARS}")
    if "\x00" in text:
        raise InvalidTenant(
            f"tenant id {text[:80]!r} contains a NUL character (\\x00), which PostgreSQL cannot "
            "store; remove it or encode the id (e.g. as hex)"
        )
    try:
        text.encode()
    except UnicodeEncodeError:
        raise InvalidTenant(
            f"tenant id {text[:80]!r} is not valid Unicode (a lone surrogate)"
        ) from None
    return text


def _short(value: object) -> str:
    """``repr`` of a value, cut short (a 5,000-digit int must not flood the message)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_max_running(cap: object) -> int | None:
    """A cap on a tenant's running jobs, or None for no cap."""
    return None if cap is None else check_int("max_running (or None: no cap)", cap)


def check_max_in_flight(cap: object) -> int | None:
    """A cap on a queue's leased jobs, all tenants together, or None for no cap. 0 is refused:
    a queue that hands out nothing is a pause, which is a weight of 0 for its tenants."""
    return None if cap is None else check_int("max_in_flight (or None: no limit)", cap)
