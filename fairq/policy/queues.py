"""The order in which a worker serves its queues: strict tiers, weighted groups, or both.

``"critical, default:6, slow:1"`` means: take from ``critical`` whenever it has work; otherwise
draw between ``default`` and ``slow`` six to one. A run of consecutive weighted entries forms one
group; an entry without a weight is a tier of its own. Every order is work-conserving: when the
preferred queue is empty the worker falls through to the others.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from fairq.errors import ConfigError

_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
#: A shard of a sharded queue: ``<queue>@<n>`` (fairq.policy.shards), never a declared name.
_SHARD_NAME = re.compile(r"^[A-Za-z0-9_.\-]+@(0|[1-9][0-9]{0,3})$")


def check_queue_name(name: str) -> str:
    """A queue's name as stores take it: a declared name, or a shard's (``imports@3``)."""
    if not isinstance(name, str) or not (_QUEUE_NAME.match(name) or _SHARD_NAME.match(name)):
        raise ConfigError(
            f"queue name {name!r} is invalid: use letters, digits, '_', '-' and '.' only"
        )
    return name


def check_declared_name(name: str) -> str:
    """A name for ``App.queue``: no '@', which names the shards of a sharded queue."""
    if isinstance(name, str) and "@" in name:
        raise ConfigError(
            f"queue name {name!r} is invalid: '@' is kept for the shards of a sharded queue "
            "(declare app.queue('imports', shards=8, shard_size=2) and fairq names them "
            "imports@0 to imports@7); use letters, digits, '_', '-' and '.' only"
        )
    return check_queue_name(name)


@dataclass
class _Group:
    """Queues drawn by smooth weighted round robin (exact shares over every short window)."""

    weights: dict[str, float]
    weighted: bool = True
    current: dict[str, float] = field(default_factory=dict)

    def order(self) -> list[str]:
        if len(self.weights) == 1:
            return list(self.weights)
        total = sum(self.weights.values())
        for name, weight in self.weights.items():
            self.current[name] = self.current.get(name, 0.0) + weight
        first = max(self.weights, key=lambda n: self.current[n])
        self.current[first] -= total
        rest = sorted((n for n in self.weights if n != first), key=lambda n: -self.weights[n])
        return [first, *rest]


class QueueOrder:
    """A parsed ``--queues`` value. ``next()`` gives the order to try for one dequeue."""

    def __init__(self, groups: list[_Group]) -> None:
        if not groups:
            raise ConfigError("a worker needs at least one queue")
        self._groups = groups

    @classmethod
    def parse(cls, spec: str) -> QueueOrder:
        groups: list[_Group] = []
        seen: set[str] = set()
        weighted_run = False
        for raw in spec.split(","):
            entry = raw.strip()
            if not entry:
                raise ConfigError(f"empty queue name in {spec!r}")
            name, sep, weight_text = entry.partition(":")
            name = check_queue_name(name.strip())
            if name in seen:
                raise ConfigError(f"queue {name!r} appears twice in {spec!r}")
            seen.add(name)
            if not sep:
                groups.append(_Group({name: 1.0}, weighted=False))
                weighted_run = False
                continue
            weight = _parse_weight(weight_text.strip(), entry)
            if weighted_run:
                groups[-1].weights[name] = weight
            else:
                groups.append(_Group({name: weight}))
                weighted_run = True
        return cls(groups)

    @classmethod
    def of(cls, *, strict: list[str], weighted: dict[str, float]) -> QueueOrder:
        """Strict tiers in the given order, then one group drawn by weight (declarations)."""
        groups = [_Group({check_queue_name(n): 1.0}, weighted=False) for n in strict]
        if weighted:
            groups.append(_Group({check_queue_name(n): w for n, w in weighted.items()}))
        return cls(groups)

    @classmethod
    def strict(cls, names: list[str]) -> QueueOrder:
        return cls([_Group({check_queue_name(n): 1.0}, weighted=False) for n in names])

    @property
    def queues(self) -> list[str]:
        return [name for group in self._groups for name in group.weights]

    def next(self) -> list[str]:
        return [name for group in self._groups for name in group.order()]

    def __str__(self) -> str:
        parts: list[str] = []
        for group in self._groups:
            if not group.weighted:
                parts.extend(group.weights)
            else:
                parts.extend(f"{n}:{w:g}" for n, w in group.weights.items())
        return ",".join(parts)


def _parse_weight(text: str, entry: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        raise ConfigError(
            f"queue weight in {entry!r} is not a number; write e.g. 'reports:3'"
        ) from None
    if not math.isfinite(weight) or weight <= 0:
        raise ConfigError(f"queue weight in {entry!r} must be a positive number")
    return weight
