"""One small model per approach, and the names ``fairq simulate`` knows them by.

A strategy is named alone (``fifo``) or with settings (``lottery:per_round=500,interval=10``).
Tenant weights come from the workload (its plans) and go to the strategies that have weights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from fairq.contract import QueueSettings
from fairq.errors import ConfigError
from fairq.policy.rate import Rate
from fairq.policy.shards import Sharding
from fairq.sim.engine import Strategy
from fairq.sim.strategies import lottery
from fairq.sim.strategies.decayed import DecayedActivity
from fairq.sim.strategies.fairq import Fairq, Own
from fairq.sim.strategies.fifo import Fifo
from fairq.sim.strategies.iteration import Iteration
from fairq.sim.strategies.lottery import Lottery
from fairq.sim.strategies.round_robin import RoundRobin
from fairq.sim.strategies.sharding import ShuffleSharding
from fairq.sim.strategies.slots import Slots
from fairq.sim.strategies.throttled import Throttled

Weights = Mapping[str, float]
Settings = dict[str, float]


def _fairq(
    weights: Weights,
    s: Settings,
    base: QueueSettings | None = None,
    own: Mapping[str, Own] | None = None,
) -> Strategy:
    """``base``: the queue's settings (a replay's), which the spec's own settings override."""
    base = base or QueueSettings(queue="sim")
    rate = Rate(int(s.pop("rate")), s.pop("per", 1.0)) if "rate" in s else base.rate
    cap = s.pop("max_running", None)
    half_life = s.pop("half_life", base.half_life)
    shards = s.pop("shards", None)
    size = s.pop("shard_size", 2.0)
    settings = replace(
        base,
        max_running=base.max_running if cap is None else int(cap),
        rate=rate,
        half_life=half_life,
    )
    return Fairq(
        slice=s.pop("slice", None),
        weights=weights,
        settings=settings,
        own=own,
        shards=None if shards is None else Sharding(_whole(shards), _whole(size)),
    )


def _whole(value: float) -> int:
    """A whole-number setting as an int; anything else is passed on for Sharding to refuse,
    naming it."""
    return int(value) if value.is_integer() else value  # type: ignore[return-value]


def _lottery(weights: Weights, s: Settings) -> Strategy:
    return Lottery(
        per_round=int(s.pop("per_round", lottery.DEFAULTS["per_round"])),
        interval=s.pop("interval", lottery.DEFAULTS["interval"]),
        threshold=s.pop("threshold", lottery.DEFAULTS["threshold"]),
        weights=weights,
    )


def _slots(weights: Weights, s: Settings) -> Strategy:
    return Slots(slots=int(s.pop("slots", 2)), retry=s.pop("retry", 60.0))


def _sharding(weights: Weights, s: Settings) -> Strategy:
    return ShuffleSharding(shards=int(s.pop("shards", 4)), per_tenant=int(s.pop("per_tenant", 2)))


def _decayed(weights: Weights, s: Settings) -> Strategy:
    return DecayedActivity(half_life=s.pop("half_life", 60.0))


#: name -> (builder, what it models, the settings it takes)
STRATEGIES: dict[str, tuple[Callable[[Weights, Settings], Strategy], str, str]] = {
    "fairq": (
        _fairq,
        "fair queuing per tenant (the reference model)",
        "max_running rate per half_life shards shard_size slice",
    ),
    "fifo": (lambda w, s: Fifo(), "one shared FIFO queue", ""),
    "iteration": (
        lambda w, s: Iteration(slice=s.pop("slice", 30.0)),
        "one FIFO queue; long jobs re-enqueue themselves every slice",
        "slice",
    ),
    "round-robin": (lambda w, s: RoundRobin(), "a ring of the tenants with jobs", ""),
    "decayed": (_decayed, "tenants ordered by decayed recent activity", "half_life"),
    "slots": (_slots, "per-tenant slots, retry in 60 s when full", "slots retry"),
    "throttled": (lambda w, s: Throttled(), "re-routing to weighted slower queues", ""),
    "lottery": (
        _lottery,
        "a planner releasing weighted lottery rounds",
        "per_round interval threshold",
    ),
    "sharding": (_sharding, "shuffle sharding, a worker pool per shard", "shards per_tenant"),
}


def build(
    spec: str,
    weights: Weights,
    *,
    queue: QueueSettings | None = None,
    own: Mapping[str, Own] | None = None,
) -> Strategy:
    """The strategy a spec names: ``name`` or ``name:key=value,key=value``. ``queue`` and
    ``own``: the settings a store keeps (a replay's), which fairq runs under."""
    name, _, rest = spec.strip().partition(":")
    found = STRATEGIES.get(name)
    if found is None:
        raise ConfigError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}")
    settings = _settings(spec, rest)
    if name == "fairq":
        strategy = _fairq(weights, settings, queue, own)
    else:
        strategy = found[0](weights, settings)
    if settings:
        raise ConfigError(
            f"strategy {name!r} has no setting {', '.join(sorted(settings))}; "
            f"it takes: {found[2] or 'none'}"
        )
    if rest:
        strategy.name = spec.strip()
    return strategy


def _settings(spec: str, text: str) -> Settings:
    settings: Settings = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        try:
            settings[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise ConfigError(f"bad setting {item!r} in strategy {spec!r}: write key=number")
    return settings
