"""Throttling by re-routing: a tenant that enqueued too much lately goes to slower queues.

Each (job, tenant) has a sliding window of its recent enqueue times. An enqueue records its
own time first; then every rule whose window (both ends inclusive) holds more than
``threshold`` enqueues matches, and the last matching rule names the queue. Rules are listed
least to most restrictive. Only the newest ``max threshold + 1`` times can change a decision,
so that is all a store keeps, and it expires with the longest window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fairq.errors import ConfigError
from fairq.policy.queues import check_queue_name
from fairq.policy.rate import MAX_PERIOD


@dataclass(frozen=True)
class Throttle:
    """Above ``threshold`` enqueues within ``per`` seconds, send new jobs to ``queue``."""

    threshold: int
    per: float
    queue: str

    def __post_init__(self) -> None:
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise ConfigError(f"a throttle threshold must be a whole number ≥ 1, got {t!r}")
        per = self.per
        if isinstance(per, bool) or not isinstance(per, (int, float)) or not math.isfinite(per):
            raise ConfigError(f"a throttle's per must be a number of seconds, got {per!r}")
        if not 0 < per <= MAX_PERIOD:
            raise ConfigError(
                f"a throttle's per must be > 0 and at most {MAX_PERIOD:g} s (31 days), got {per}"
            )
        check_queue_name(self.queue)


def window_size(rules: Sequence[Throttle]) -> int:
    """How many recent enqueue times decide every rule."""
    return max(rule.threshold for rule in rules) + 1


def window_span(rules: Sequence[Throttle]) -> float:
    """How long a window must be kept: after this, no recorded time can match any rule."""
    return max(rule.per for rule in rules)


def choose_queue(times: Sequence[float], now: float, rules: Sequence[Throttle], home: str) -> str:
    """The queue for an enqueue at ``now``; ``times`` already include ``now``."""
    chosen = home
    for rule in rules:
        if sum(1 for t in times if now - rule.per <= t <= now) > rule.threshold:
            chosen = rule.queue
    return chosen


def check_rules(rules: Sequence[Throttle], home: str, declared: Sequence[str]) -> list[Throttle]:
    """Refuse rules that route to the job's own queue or to a queue nobody declared."""
    checked = list(rules)
    for rule in checked:
        if not isinstance(rule, Throttle):
            raise ConfigError(f"throttle rules must be fairq.Throttle objects, got {rule!r}")
        if rule.queue == home:
            raise ConfigError(
                f"throttle rule {rule} routes to the job's own queue {home!r}; name a slower queue"
            )
        if rule.queue not in declared:
            raise ConfigError(
                f"throttle rule {rule} routes to undeclared queue {rule.queue!r}; declare it "
                f"with app.queue({rule.queue!r}, weight=…) so workers serve it"
            )
    return checked
