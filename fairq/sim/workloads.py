"""Named, seeded scenarios, and a user's own trace.

Each scenario is a function of a ``random.Random`` and keyword parameters (its defaults are
its documentation); ``make(name, seed, params)`` builds one. Times are seconds on the virtual
clock; durations are the real run time of a job, and its declared cost is the same unless a
scenario says otherwise.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fairq.errors import ConfigError
from fairq.sim.engine import SimJob

Row = tuple[float, str, float]  # (arrival, tenant, duration)
Named = tuple[float, str, float, str]  # (arrival, tenant, duration, job name)
#: Plan weights, given to tenants in turn where a scenario has weights.
PLANS = (1.0, 3.0, 6.0)


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Jobs in arrival order, the tenants' plan weights, and the tenants watched as newcomers."""

    name: str
    jobs: list[SimJob]
    weights: dict[str, float] = field(default_factory=dict)
    newcomers: tuple[str, ...] = ()


def _jobs(rows: list[Row]) -> list[SimJob]:
    rows.sort(key=lambda r: r[0])
    return [
        SimJob(id=i, arrival=a, tenant=t, duration=d, cost=d) for i, (a, t, d) in enumerate(rows)
    ]


def _named(rows: list[Named]) -> list[SimJob]:
    """Jobs of several types, each declaring its type's mean run time as its cost: what fairq
    charges once it has learned the type (a warm store, not a cold start)."""
    rows.sort(key=lambda r: r[0])
    runs: dict[str, list[float]] = {}
    for _, _, duration, name in rows:
        runs.setdefault(name, []).append(duration)
    mean = {name: sum(d) / len(d) for name, d in runs.items()}
    return [
        SimJob(id=i, arrival=a, tenant=t, duration=d, cost=mean[n], name=n)
        for i, (a, t, d, n) in enumerate(rows)
    ]


def _short(rng: random.Random, median: float) -> float:
    """A short job's run time: log-normal around ``median`` (a long right tail, as real job
    lengths have), at least 1 ms."""
    return max(rng.lognormvariate(math.log(median), 1.0), 0.001)


def flood(
    rng: random.Random,
    *,
    jobs: int = 10_000,
    small: int = 5,
    per_small: int = 20,
    duration: float = 1.0,
    workers_hint: int = 8,
) -> Workload:
    """One tenant enqueues ``jobs`` at once; ``small`` tenants trickle ``per_small`` each in
    over the first half of the flood (as ``workers_hint`` workers would drain it)."""
    span = jobs * duration / workers_hint / 2
    rows: list[Row] = [(0.0, "flood", duration) for _ in range(jobs)]
    for s in range(small):
        rows += [(rng.uniform(0, span), f"small-{s}", duration) for _ in range(per_small)]
    return Workload(
        name="flood", jobs=_jobs(rows), newcomers=tuple(f"small-{s}" for s in range(small))
    )


def bursts(
    rng: random.Random,
    *,
    tenants: int = 10,
    bursts: int = 30,
    size: int = 100,
    gap: float = 20.0,
    duration: float = 0.5,
) -> Workload:
    """Every ``gap`` seconds on average one random tenant enqueues a burst of ``size`` jobs."""
    rows: list[Row] = []
    at = 0.0
    for _ in range(bursts):
        tenant = f"t{rng.randrange(tenants)}"
        rows += [(at, tenant, rng.expovariate(1 / duration)) for _ in range(size)]
        at += rng.expovariate(1 / gap)
    return Workload(name="bursts", jobs=_jobs(rows))


def many_small(
    rng: random.Random,
    *,
    tenants: int = 10_000,
    per_tenant: int = 3,
    load: float = 0.9,
    duration: float = 0.2,
    workers_hint: int = 8,
) -> Workload:
    """``tenants`` tenants, ``per_tenant`` jobs each, arriving as a Poisson stream at ``load``
    times what ``workers_hint`` workers can run."""
    count = tenants * per_tenant
    span = count * duration / (workers_hint * load)
    rows: list[Row] = [
        (rng.uniform(0, span), f"t{i % tenants:05d}", rng.expovariate(1 / duration))
        for i in range(count)
    ]
    return Workload(name="many-small", jobs=_jobs(rows))


def heavy_light(
    rng: random.Random,
    *,
    tenants: int = 4,
    per_tenant: int = 500,
    heavy: float = 10.0,
    light: float = 0.1,
) -> Workload:
    """Tenant ``heavy`` runs ``heavy``-second jobs, the others ``light``-second ones; everyone
    enqueues ``per_tenant`` at once. Fair by jobs is not fair by worker time."""
    rows: list[Row] = [(0.0, "heavy", heavy) for _ in range(per_tenant)]
    for t in range(tenants - 1):
        rows += [(rng.uniform(0, 1), f"light-{t}", light) for _ in range(per_tenant)]
    return Workload(name="heavy-light", jobs=_jobs(rows))


def newcomer(
    rng: random.Random,
    *,
    jobs: int = 10_000,
    others: int = 3,
    per_other: int = 2_000,
    late: int = 50,
    duration: float = 1.0,
    at: float = 600.0,
) -> Workload:
    """A flood plus ``others`` busy tenants from the start; one tenant arrives at ``at`` with
    ``late`` jobs. How long until its first job starts?"""
    rows: list[Row] = [(0.0, "flood", duration) for _ in range(jobs)]
    for o in range(others):
        rows += [(rng.uniform(0, 10), f"busy-{o}", duration) for _ in range(per_other)]
    rows += [(at + rng.uniform(0, 1), "newcomer", duration) for _ in range(late)]
    return Workload(name="newcomer", jobs=_jobs(rows), newcomers=("newcomer",))


def plans(rng: random.Random, *, per_tenant: int = 3_000, duration: float = 1.0) -> Workload:
    """Three backlogged tenants on plans weighted 1, 3 and 6: they should get 10/30/60 %."""
    weights = {"basic": 1.0, "pro": 3.0, "enterprise": 6.0}
    rows: list[Row] = [(rng.uniform(0, 1), t, duration) for t in weights for _ in range(per_tenant)]
    return Workload(name="plans", jobs=_jobs(rows), weights=weights)


def batches(
    rng: random.Random,
    *,
    batch_tenants: int = 2,
    batch_jobs: int = 4,
    batch: float = 1800.0,
    small: int = 40,
    per_small: int = 30,
    short: float = 0.5,
    workers_hint: int = 8,
) -> Workload:
    """Long batch jobs beside short ones: ``batch_tenants`` tenants each enqueue ``batch_jobs``
    exports of ``batch`` seconds at t=0; ``small`` tenants send ``per_small`` short jobs each
    (median ``short`` s) at random times while the exports would run on ``workers_hint``
    workers. Whoever runs an export whole holds a worker for all of it."""
    span = batch_tenants * batch_jobs * batch / workers_hint
    rows: list[Named] = [
        (0.0, f"batch-{b}", batch, "export")
        for b in range(batch_tenants)
        for _ in range(batch_jobs)
    ]
    for s in range(small):
        rows += [(rng.uniform(0, span), f"small-{s}", _short(rng, short), "sync")
                 for _ in range(per_small)]  # fmt: skip
    return Workload(
        name="batches", jobs=_named(rows), newcomers=tuple(f"small-{s}" for s in range(small))
    )


def mixed(
    rng: random.Random,
    *,
    backlog: int = 2_000,
    batch_tenants: int = 2,
    batch_jobs: int = 4,
    batch: float = 1200.0,
    small: int = 30,
    per_small: int = 40,
    short: float = 0.5,
    workers_hint: int = 16,
) -> Workload:
    """Everything at once, with plan weights 1, 3 and 6 and real job lengths. At t=0 tenants
    ``basic``, ``pro`` and ``enterprise`` (weights 1, 3, 6) each enqueue ``backlog`` jobs of
    their own type (log-normal run times, medians 4, 2 and 1 x ``short`` s: the heavier plan
    runs the shorter jobs, so counting jobs is far from fair by worker time) and
    ``batch_tenants`` tenants (weights 1, 3, ...) enqueue ``batch_jobs`` exports of ``batch``
    seconds each; ``small`` tenants (weights 1, 3, 6 in turn) send ``per_small`` short jobs
    each at random while it all would run on ``workers_hint`` workers. The talk's comparison
    table (``fairq simulate --verdict``) runs on it."""
    weights: dict[str, float] = {}
    rows: list[Named] = []
    for plan, (tenant, kind) in enumerate((("basic", "import"), ("pro", "report"),
                                           ("enterprise", "sync-all"))):  # fmt: skip
        weights[tenant] = PLANS[plan]
        rows += [(0.0, tenant, _short(rng, short * 2 ** (2 - plan)), kind) for _ in range(backlog)]
    for b in range(batch_tenants):
        weights[f"batch-{b}"] = PLANS[b % len(PLANS)]
        rows += [(0.0, f"batch-{b}", batch, "export") for _ in range(batch_jobs)]
    work = sum(r[2] for r in rows) + small * per_small * short * math.exp(0.5)
    span = work / workers_hint
    for s in range(small):
        weights[f"small-{s}"] = PLANS[s % len(PLANS)]
        rows += [(rng.uniform(0, span), f"small-{s}", _short(rng, short), "sync")
                 for _ in range(per_small)]  # fmt: skip
    return Workload(
        name="mixed",
        jobs=_named(rows),
        weights=weights,
        newcomers=tuple(f"small-{s}" for s in range(small)),
    )


Scenario = Callable[..., Workload]
SCENARIOS: dict[str, Scenario] = {
    "flood": flood,
    "bursts": bursts,
    "many-small": many_small,
    "heavy-light": heavy_light,
    "newcomer": newcomer,
    "plans": plans,
    "batches": batches,
    "mixed": mixed,
}


def make(name: str, seed: int, params: Mapping[str, str]) -> Workload:
    """Build scenario ``name`` with ``params`` (text, converted to each default's type)."""
    scenario = SCENARIOS.get(name)
    if scenario is None:
        raise ConfigError(f"unknown workload {name!r}; choose from {', '.join(SCENARIOS)}")
    defaults = defaults_of(scenario)
    values: dict[str, object] = {}
    for key, text in params.items():
        if key not in defaults:
            raise ConfigError(
                f"workload {name!r} has no parameter {key!r}; it takes: {', '.join(defaults)}"
            )
        kind = type(defaults[key])
        try:
            values[key] = kind(text)
        except ValueError:
            raise ConfigError(
                f"{name} parameter {key}={text!r}: expected {kind.__name__}"
            ) from None
    return scenario(random.Random(seed), **values)


def defaults_of(scenario: Scenario) -> dict[str, int | float]:
    """A scenario's parameters and their defaults (every one is an int or a float)."""
    return dict(scenario.__kwdefaults__ or {})


def load_trace(path: Path) -> Workload:
    """A trace of (arrival, tenant, duration): CSV with that header, or JSON, a list of
    objects with those keys. Arrival and duration are seconds; arrivals need not be sorted."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read trace {path}: {error}") from None
    if path.suffix.lower() == ".json":
        records = _json_records(path, text)
    elif path.suffix.lower() == ".csv":
        records = list(csv.DictReader(text.splitlines()))
    else:
        raise ConfigError(f"trace {path}: name it .csv or .json so its format is known")
    if not records:
        raise ConfigError(f"trace {path} holds no jobs")
    rows = [_row(path, n, record) for n, record in enumerate(records, start=1)]
    return Workload(name=f"trace:{path.name}", jobs=_jobs(rows))


def _json_records(path: Path, text: str) -> list[dict[str, object]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"trace {path} is not valid JSON: {error}") from None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ConfigError(
            f'trace {path}: expected a JSON list of {{"arrival": s, "tenant": id, "duration": s}}'
        )
    return data


def _row(path: Path, n: int, record: Mapping[str, object]) -> Row:
    where = f"trace {path}, job {n}"
    missing = [k for k in ("arrival", "tenant", "duration") if record.get(k) in (None, "")]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)} (need arrival, tenant, duration)")
    try:
        arrival = float(str(record["arrival"]))
        duration = float(str(record["duration"]))
    except ValueError:
        raise ConfigError(f"{where}: arrival and duration must be numbers of seconds") from None
    if not (arrival >= 0 and duration >= 0) or arrival == float("inf") or duration == float("inf"):
        raise ConfigError(f"{where}: arrival and duration must be finite and not negative")
    return (arrival, str(record["tenant"]), duration)
