"""How figures read on the pages (Jinja filters). Tenant ids are escaped by Jinja itself."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from fairq.reports.text import format_age, format_wait
from fairq.reports.verdicts import format_span


def age(seconds: float | None) -> str:
    return "–" if seconds is None else format_age(seconds)


def wait(seconds: float | None) -> str:
    return "–" if seconds is None else format_wait(seconds)


def per_minute(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def estimate(seconds: float | None) -> str:
    """An ETA: always marked as an estimate (``~``)."""
    return "–" if seconds is None else "~" + format_age(seconds)


def clock(ts: float | None) -> str:
    if ts is None:
        return "–"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def cap(value: int | None) -> str:
    return "none" if value is None else f"{value:,}"


def weight(value: float) -> str:
    return "0 (paused)" if value == 0 else f"{value:g}"


def count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def share(value: float) -> str:
    return f"{value:.0%}"


def span(value: float | None) -> str:
    return "none" if value is None else format_span(value)


def query(params: dict[str, str]) -> str:
    """A query string (``?a=1&b=2``), or nothing."""
    return "?" + urlencode(params) if params else ""


def error_parts(text: str | None) -> tuple[str, str]:
    """A stored error as its first line (the message, always shown) and the rest (the
    traceback a worker keeps after it, shown folded): together, the whole text."""
    head, _, rest = (text or "").partition("\n")
    return head, rest.strip("\n")


def status_class(status: str) -> str:
    """The CSS class of a verdict (``waiting its turn`` → ``st-waiting``)."""
    return "st-" + status.split()[0].replace("-", "")


FILTERS: dict[str, Callable[..., Any]] = {
    "age": age,
    "wait": wait,
    "per_minute": per_minute,
    "estimate": estimate,
    "clock": clock,
    "cap": cap,
    "weight": weight,
    "count": count,
    "share": share,
    "span": span,
    "query": query,
    "status_class": status_class,
    "error_parts": error_parts,
}
