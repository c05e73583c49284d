"""Shuffle sharding: each tenant of a sharded queue gets ``size`` of its ``count`` shards.

A shard is a sub-queue named ``<queue>@<i>`` (``shard_name``), which the scheduler serves like
any other queue, so fairness holds within each shard. A tenant's shards come from rendezvous
hashing: shard i scores SHA-256(tenant, queue, i) and the ``size`` highest scores win. That is
stable across processes, Python versions and restarts (no ``hash()``, which is salted per
process), and when ``count`` grows a tenant keeps each shard unless a new one outscores it.

A flooding tenant can only crowd the tenants that got the very same shards: with ``count``
shards and ``size`` each, any other tenant shares all of them with probability
1 / C(count, size) (``blast_radius``). Which of its shards a job goes to is the store's choice
at enqueue (the least loaded, ``Backend.enqueue``); this module only names the candidates. Load
is all it weighs: a shard whose pool hung keeps the jobs placed there before it looked busier,
so a hung pool delays some jobs of every tenant with that shard (docs/sharding.md).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fairq.errors import ConfigError
from fairq.policy.bounds import check_tenant

#: Separates a queue's name from its shard number. Not allowed in a declared queue's name, so
#: a shard can never clash with a queue of its own.
SEPARATOR = "@"
#: Most shards a queue may have: worker options and stats list them one by one.
MAX_SHARDS = 1024
#: Other eligible tenants a shard's load counts at most: beyond that a shard is simply crowded,
#: and the count (an index range in SQL stores) stays cheap however many tenants wait there.
MAX_OTHERS = 100

_SHARD = re.compile(r"^(?P<base>[A-Za-z0-9_.\-]+)@(?P<index>0|[1-9][0-9]{0,3})$")


def shard_name(queue: str, index: int) -> str:
    return f"{queue}{SEPARATOR}{index}"


def split_shard(name: str) -> tuple[str, int] | None:
    """(queue, shard index) of a shard's name; None for any other queue name."""
    found = _SHARD.match(name)
    if found is None:
        return None
    return found["base"], int(found["index"])


@dataclass(frozen=True)
class Sharding:
    """``count`` shards, ``size`` per tenant; ``assign`` pins tenants to explicit shards."""

    count: int
    size: int
    assign: Mapping[str, Sequence[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        count, size = self.count, self.size
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(
                f"shards must be a whole number of at least 1, got {count!r}; "
                "e.g. shards=8, shard_size=2"
            )
        if count > MAX_SHARDS:
            raise ConfigError(f"shards={count} is over the limit of {MAX_SHARDS}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(
                f"shard_size must be a whole number of at least 1, got {size!r}; "
                "it is how many shards each tenant gets, e.g. shard_size=2"
            )
        if size > count:
            raise ConfigError(
                f"shard_size={size} is more than shards={count}: a tenant cannot get more "
                "shards than there are; lower shard_size or raise shards"
            )
        if not isinstance(self.assign, Mapping):
            raise ConfigError(
                f"assign must map tenants to lists of shard numbers, got {self.assign!r}"
            )
        checked: dict[str, tuple[int, ...]] = {}
        for tenant, shards in self.assign.items():
            checked[check_tenant(tenant)] = _check_assigned(tenant, shards, count)
        object.__setattr__(self, "assign", checked)

    def shards_of(self, queue: str, tenant: str) -> list[int]:
        """The tenant's shards, best first: its assignment, else the ``size`` highest scores."""
        pinned = self.assign.get(tenant)  # checked: a tuple of shards in range
        if pinned is not None:
            return list(pinned)
        return tenant_shards(queue, tenant, self.count, self.size)

    def queues_of(self, queue: str, tenant: str) -> list[str]:
        return [shard_name(queue, i) for i in self.shards_of(queue, tenant)]

    def queues(self, queue: str) -> list[str]:
        return [shard_name(queue, i) for i in range(self.count)]


def _check_assigned(tenant: str, shards: object, count: int) -> tuple[int, ...]:
    if isinstance(shards, (str, bytes)) or not isinstance(shards, Sequence) or not shards:
        raise ConfigError(
            f"assign[{tenant!r}] must be a non-empty list of shard numbers, got {shards!r}"
        )
    seen: list[int] = []
    for index in shards:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise ConfigError(
                f"assign[{tenant!r}] names shard {index!r}, but the queue has shards 0 to "
                f"{count - 1}; name shards in that range or raise shards"
            )
        if index not in seen:
            seen.append(index)
    return tuple(seen)


def score(queue: str, tenant: str, index: int) -> int:
    """Shard ``index``'s rendezvous score for a tenant: the first 8 bytes of a SHA-256."""
    data = b"\x00".join((queue.encode(), tenant.encode("utf-8", "surrogatepass"), b"%d" % index))
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def tenant_shards(queue: str, tenant: str, count: int, size: int) -> list[int]:
    """The ``size`` shards of ``count`` with the highest scores, highest first (ties: the
    lower index, though 64-bit ties do not happen in practice)."""
    ranked = sorted(range(count), key=lambda i: (-score(queue, tenant, i), i))
    return ranked[:size]


def blast_radius(count: int, size: int) -> float:
    """The chance that another tenant has all of a given tenant's shards: 1 / C(count, size)."""
    return 1 / math.comb(count, size)


def parse_shards(spec: str, count: int, queue: str) -> list[int]:
    """Shard numbers from a worker's ``--shards``: ``0-3``, ``1,4,7`` or both (``0-1,6``)."""
    chosen: list[int] = []
    for raw in spec.split(","):
        part = raw.strip()
        low_text, dash, high_text = part.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise ConfigError(
                f"--shards {spec!r}: {part!r} is not a shard number or range; write e.g. "
                "'0-3' or '1,4,7'"
            ) from None
        if low > high:
            raise ConfigError(f"--shards {spec!r}: the range {part!r} runs backwards; write it "
                              f"low to high, e.g. '{high}-{low}'")  # fmt: skip
        for index in (low, high):
            if not 0 <= index < count:
                raise ConfigError(
                    f"--shards {spec!r}: queue {queue!r} has shards 0 to {count - 1}, not "
                    f"{index}; name shards in that range"
                )
        chosen.extend(i for i in range(low, high + 1) if i not in chosen)
    return chosen


def least_loaded(loads: Sequence[tuple[int, int]]) -> int:
    """The position of the candidate shard to enqueue in. Each load is (eligible tenants
    other than the enqueueing one, its own ready jobs there).

    Others count up to ``MAX_OTHERS``. The scheduler is fair within a shard: each round it
    serves one job of each eligible tenant, so a new job starts after about
    (own ready + 1) * (others + 1) turns. The shard where that is
    least wins; ties go to the one with fewer others, then to the first named (the tenant's best
    score). So a tenant alone, or with the same company in each shard, spreads its jobs evenly,
    and one that shares a shard with a flood puts two of every three jobs in its quiet shard:
    it keeps its fair share of the shard it shares as well as all of the other.
    """

    def turns(at: int) -> tuple[int, int, int]:
        others, own = loads[at]
        others = min(others, MAX_OTHERS)
        return ((own + 1) * (others + 1), others, at)

    return min(range(len(loads)), key=turns)
