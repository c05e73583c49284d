"""Throttling by re-routing: a tenant that enqueued too much lately goes to slower queues.

Each (job, tenant) has a sliding window of its recent enqueue times. An enqueue records its
own time first; then every rule whose window (both ends inclusive) holds more than
``threshold`` enqueues matches, and the last matching rule names the queue. Rules are listed
least to most restrictive. Only the newest ``max threshold + 1`` times can change a decision,
so that is all a store keeps, and it expires with the longest window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from fairq.errors import ConfigError
from fairq.policy.bounds import check_int, check_seconds
from fairq.policy.queues import check_queue_name
from fairq.policy.rate import MAX_PERIOD


@dataclass(frozen=True, init=False)
class Throttle:
    """Above ``threshold`` enqueues within ``per`` seconds (or a ``timedelta``), send new jobs
    to ``queue``."""

    threshold: int
    per: float
    queue: str

    def __init__(self, threshold: int, per: float | timedelta, queue: str) -> None:
        object.__setattr__(self, "threshold", check_int("a throttle threshold", threshold))
        per = check_seconds("a throttle's per", per, most=MAX_PERIOD)
        object.__setattr__(self, "per", per)
        object.__setattr__(self, "queue", check_queue_name(queue))


class Routing(NamedTuple):
    """One enqueue to count and route: a job's, or a peer broker's job's (``Backend.route``)."""

    name: str  # the job name: with the tenant, it names the window
    tenant: str
    home: str  # the queue the job goes to when no rule matches
    rules: Sequence[Throttle]


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
