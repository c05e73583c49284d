"""``Whole``: the click type of every option that takes a whole number (and ``Duration``).

It reads the text with ``fairq.policy.bounds.read_int``, the one reader of integers typed by a
person (the dashboard's fields and query parameters use it too), so ``²``, ``①``, ``١٢`` or a
5,000-digit number is refused with the same one-line message everywhere, never a traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from fairq.errors import ConfigError
from fairq.policy.bounds import MAX_INT, MAX_SECONDS, read_int
from fairq.policy.rate import UNITS

if TYPE_CHECKING:  # click 8.3+ types ParamType by value; 8.1 (still allowed) cannot subscript it
    _Whole = click.ParamType[int | None, Any]
    _Duration = click.ParamType[float | None, Any]
else:
    _Whole = _Duration = click.ParamType


class Whole(_Whole):
    """A whole number from ``least`` to ``most``; ``none`` (any case) reads as None where
    ``none_ok`` (a setting that can be switched off, e.g. ``--max-running none``)."""

    name = "integer"

    def __init__(self, least: int = 1, most: int = MAX_INT, *, none_ok: bool = False) -> None:
        self.least = least
        self.most = most
        self.none_ok = none_ok

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | None:
        if isinstance(value, int) and not isinstance(value, bool):  # a default given as an int
            return value
        text = str(value)
        if self.none_ok and text.strip().lower() == "none":
            return None
        try:
            return read_int(text, least=self.least, most=self.most)
        except ConfigError as exc:
            message = str(exc) + (" (or 'none')" if self.none_ok else "")
            self.fail(message, param, ctx)

    def __repr__(self) -> str:
        return f"Whole({self.least}, {self.most})"


class Duration(_Duration):
    """A duration: a whole number and a unit, ``90s``, ``30m``, ``8h``, ``2d`` (the units of a
    rate), or plain seconds; from ``least`` to ``most`` seconds. Converts to float seconds."""

    name = "duration"

    def __init__(self, least: float = 1.0, most: float = MAX_SECONDS) -> None:
        self.least = least
        self.most = most

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float | None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        text = str(value).strip().lower()
        number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = text[len(number) :] or "s"
        try:
            if unit not in UNITS:
                raise ConfigError(f"{unit!r} is not a unit; use s, m, h or d")
            seconds = read_int(number, most=MAX_INT) * UNITS[unit]
            if not self.least <= seconds <= self.most:
                raise ConfigError(f"{value!r} is out of range: from {self.least:g} s to "
                                  f"{self.most / 86400:g} days")  # fmt: skip
        except ConfigError as exc:
            self.fail(f"{exc} (write e.g. 30m, 8h or 2d)", param, ctx)
        return seconds
