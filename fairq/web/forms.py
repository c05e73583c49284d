"""Reading the tenant form: every field checked by fairq's own rules before the store is touched.

A field left as shown (or blank) is kept; "default" returns it to the queue's default. Any bad
field refuses the whole form with a message per field, so a half-applied change cannot happen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fairq.contract import KEEP, Keep, TenantStats
from fairq.errors import ConfigError
from fairq.policy.bounds import check_max_running, check_weight, read_int
from fairq.policy.rate import Rate

DEFAULT = "default"
FIELD_CHARS = 100  # longer input is refused, not parsed


@dataclass
class TenantChange:
    """What to store: each of weight, cap and rate is a value, None (queue default) or KEEP."""

    weight: float | Keep | None = KEEP
    max_running: int | Keep | None = KEEP
    rate: Rate | Keep | None = KEEP
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def changes_something(self) -> bool:
        return any(not isinstance(v, Keep) for v in (self.weight, self.max_running, self.rate))


def read_action(action: str) -> TenantChange | None:
    """The buttons that need no fields: pause, resume (weight back to the queue default), reset."""
    if action == "pause":
        return TenantChange(weight=0.0)
    if action == "resume":
        return TenantChange(weight=None)
    if action == "reset":
        return TenantChange(weight=None, max_running=None, rate=None)
    return None


def read_tenant_form(form: Mapping[str, str], current: TenantStats | None) -> TenantChange:
    """The change the form asks for, compared with ``current`` (what the form showed)."""
    change = TenantChange()
    texts = {
        name: form.get(name, "").strip() for name in ("weight", "max_running", "rate", "burst")
    }
    for name, text in texts.items():
        if len(text) > FIELD_CHARS:
            change.errors[name] = f"{name}: {len(text)} characters is too long for a value"
    if change.errors:
        return change
    _read_weight(texts["weight"], current, change)
    _read_cap(texts["max_running"], current, change)
    _read_rate(texts["rate"], texts["burst"], current, change)
    return change


def _read_weight(text: str, current: TenantStats | None, change: TenantChange) -> None:
    if not text:
        return
    if text.lower() == DEFAULT:
        change.weight = None
        return
    try:
        number = float(text)
    except ValueError:
        change.errors["weight"] = (
            f"weight: {text!r} is not a number; give e.g. 1, 2.5 or 10 (0 pauses the tenant, "
            "'default' follows the queue's default)"
        )
        return
    try:
        weight = check_weight(number, paused_ok=True)
    except ConfigError as exc:
        change.errors["weight"] = str(exc)
        return
    if current is None or weight != current.weight:
        change.weight = weight


def _read_cap(text: str, current: TenantStats | None, change: TenantChange) -> None:
    if not text:
        return
    if text.lower() in (DEFAULT, "none"):
        change.max_running = None
        return
    try:
        cap = check_max_running(read_int(text))
    except ConfigError as exc:
        change.errors["max_running"] = f"cap: {exc}; or 'default' to follow the queue's default"
        return
    if current is None or cap != current.max_running:
        change.max_running = cap


def _read_rate(
    text: str, burst_text: str, current: TenantStats | None, change: TenantChange
) -> None:
    burst = 1
    if burst_text:
        try:
            burst = read_int(burst_text, "burst")
        except ConfigError as exc:
            change.errors["burst"] = str(exc)
            return
        if not text or text.lower() in (DEFAULT, "none"):
            change.errors["burst"] = (
                "burst: a burst needs a rate to apply to; give a rate (e.g. 100/minute) or "
                "clear the burst field"
            )
            return
    if not text:
        return
    if text.lower() in (DEFAULT, "none"):
        change.rate = None
        return
    try:
        rate = Rate.parse(text, burst)
    except ConfigError as exc:
        change.errors["rate"] = str(exc)
        return
    if current is None or rate != current.rate:
        change.rate = rate
