"""What if: a queue's recorded jobs replayed under other settings, workers and strategies.

Three kinds of run, compared per tenant: ``actual`` (the recorded starts and ends), ``as-is``
(the recorded arrivals replayed by the real scheduler, the reference model, under the settings
in force on the pool the store saw: how far it is from ``actual`` is the replay's fidelity on
this trace) and one ``what-if`` per strategy asked, under the changed settings. The replays'
workers come up when the first recorded job started (``pool_start``). Every replay
runs on the simulator's virtual clock (fairq.sim.engine), so the same trace gives the same
figures.

Per tenant: wait p50/p99/max, share of the worker time, first start after its first arrival;
per run: Jain's index and Gini over backlogged windows (fairq.sim.metrics, the same window for
every run, so they compare).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from fairq.contract import QueueSettings
from fairq.errors import ConfigError
from fairq.policy.bounds import check_int, check_seconds, check_weight
from fairq.policy.rate import Rate
from fairq.sim.compare import Outcome
from fairq.sim.engine import Outage, Record, Simulation
from fairq.sim.metrics import Figures
from fairq.sim.replay import Recorded, Timeline
from fairq.sim.strategies import build
from fairq.sim.strategies.fairq import Own
from fairq.sim.tally import Tally

ACTUAL, AS_IS = "actual", "as-is"
NONE = "none"
TENANT_KEYS = {
    "weight": "weight",
    "cap": "max_running",
    "max_running": "max_running",
    "rate": "rate",
}
QUEUE_KEYS = {
    **TENANT_KEYS,
    "max_in_flight": "max_in_flight",
    "half_life": "half_life",
    "max_debt": "max_debt",
}
SEED = 1  # a replay draws nothing at random; the seed is for strategies that do (lottery)
_SHOWN = 12  # tenants in the table (the busiest); --json has them all


@dataclass(frozen=True, kw_only=True)
class Changes:
    """``--set TENANT:KEY=VALUE`` and ``--set-queue KEY=VALUE``, read and checked."""

    tenants: dict[str, dict[str, object]] = field(default_factory=dict)  # tenant -> field -> value
    queue: dict[str, object] = field(default_factory=dict)  # QueueSettings field -> value
    given: tuple[str, ...] = ()  # as typed, for the report

    def __bool__(self) -> bool:
        return bool(self.tenants or self.queue)


def read_changes(sets: Sequence[str], set_queue: Sequence[str]) -> Changes:
    tenants: dict[str, dict[str, object]] = defaultdict(dict)
    queue: dict[str, object] = {}
    for text in sets:
        left, equals, value = text.partition("=")
        tenant, colon, key = left.rpartition(":")
        key = key.strip().lower()
        if not (colon and tenant and equals and key and value.strip()):
            raise ConfigError(
                f"--set {text!r}: write TENANT:KEY=VALUE, e.g. --set acme:weight=3 "
                f"(keys: {', '.join(sorted(set(TENANT_KEYS) - {'max_running'}))})"
            )
        if key not in TENANT_KEYS:
            raise ConfigError(
                f"--set {text!r}: a tenant has no setting {key!r}; use weight, cap or rate"
            )
        tenants[tenant][TENANT_KEYS[key]] = _value(f"--set {text!r}", TENANT_KEYS[key], value)
    for text in set_queue:
        key, equals, value = text.partition("=")
        key = key.strip().lower()
        if not (equals and key and value.strip()):
            raise ConfigError(f"--set-queue {text!r}: write KEY=VALUE, e.g. max_in_flight=8")
        if key not in QUEUE_KEYS:
            raise ConfigError(
                f"--set-queue {text!r}: a queue has no setting {key!r}; use "
                f"{', '.join(k for k in QUEUE_KEYS if k != 'max_running')}"
            )
        queue[QUEUE_KEYS[key]] = _value(f"--set-queue {text!r}", QUEUE_KEYS[key], value)
    return Changes(tenants=dict(tenants), queue=queue, given=(*sets, *set_queue))


def _value(where: str, key: str, text: str) -> object:
    """A setting's value, checked by fairq's own bounds; ``none`` removes a cap or a rate."""
    text = text.strip()
    if text.lower() == NONE:
        if key in ("weight", "max_debt"):
            raise ConfigError(f"{where}: {key} cannot be none; give a number")
        return None
    try:
        if key == "rate":
            return Rate.parse(text)
        number = _number(where, text)
        if key in ("max_running", "max_in_flight"):
            return check_int(key, int(number) if number.is_integer() else number)
        if key == "weight" and number == 0:
            raise ConfigError(
                "weight 0 pauses the tenant and its jobs would never run in the replay; "
                "give a weight above 0"
            )
        return check_weight(number) if key == "weight" else check_seconds(key, number)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None


def _number(where: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{text!r} is not a number") from None


def check_tenants(changes: Changes, recorded: Recorded) -> None:
    """Refuse a change for a tenant the window has no job of (a typo, most likely)."""
    known = set(recorded.weights)
    for tenant in changes.tenants:
        if tenant not in known:
            names = ", ".join(sorted(known)[:10]) + (", …" if len(known) > 10 else "")
            raise ConfigError(
                f"--set {tenant}:…: tenant {tenant!r} has no job in this window of queue "
                f"{recorded.queue!r}; its tenants: {names}"
            )


def changed(recorded: Recorded, changes: Changes) -> tuple[QueueSettings, dict[str, Own]]:
    """The queue's settings and the tenants' own, with the changes made."""
    settings = replace(recorded.settings, **changes.queue)  # type: ignore[arg-type]
    own = dict(recorded.own)
    for tenant, values in changes.tenants.items():
        own[tenant] = replace(own.get(tenant, Own()), **values)  # type: ignore[arg-type]
    return settings, own


def weights_of(
    recorded: Recorded, settings: QueueSettings, own: Mapping[str, Own]
) -> dict[str, float]:
    found: dict[str, float] = {}
    for tenant in recorded.weights:
        weight = own[tenant].weight if tenant in own else None
        found[tenant] = settings.weight if weight is None else weight
    return found


# -- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Run:
    """One run's figures, with what it ran under; its records only when kept (``replay``'s
    ``records``: plots, tests), since a run of a long window does not hold them."""

    name: str
    workers: int
    weights: dict[str, float]
    records: list[Record]
    figures: Figures
    tenants: dict[str, TenantRow]
    mean_run: float  # the mean run time of its jobs

    def outcome(self) -> Outcome:
        return Outcome(strategy=self.name, records=self.records, figures=self.figures, held=[])


Progress = Callable[[str, int], None]  # (run, jobs finished so far)


@dataclass
class _Plan:
    name: str
    workers: int
    weights: dict[str, float]
    tally: Tally
    records: list[Record] | None
    simulation: Simulation | None = None  # None: the actual run, as recorded

    def keep(self, record: Record) -> None:
        self.tally.add(record)
        if self.records is not None:
            self.records.append(record)


def replay(
    recorded: Recorded,
    changes: Changes,
    strategies: Sequence[str],
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    records: bool = False,
) -> list[Run]:
    """``actual``, ``as-is`` and one ``what-if`` per strategy (none when nothing changes),
    all in one pass over the trace, a page at a time: every run is fed each page before the
    next is read, and folds its records into its figures as its jobs finish (``Tally``), so
    memory does not grow with the window. ``records``: keep every run's records too."""
    pool = recorded.workers()
    settings, own = changed(recorded, changes)
    weights = weights_of(recorded, settings, own)
    plans = [_Plan(ACTUAL, pool, recorded.weights, Tally(window=recorded.window,
                   weights=recorded.weights), [] if records else None)]  # fmt: skip
    runs = [(AS_IS, build("fairq", recorded.weights, queue=recorded.settings, own=recorded.own),
             pool, recorded.weights)]  # fmt: skip
    for strategy in [build(spec, weights, queue=settings, own=own) for spec in strategies]:
        if changes or (workers or pool) != pool or strategy.name != "fairq":
            runs.append((f"what-if {strategy.name}", strategy, workers or pool, weights))
    for name, strategy, size, given in runs:
        plan = _Plan(name, size, given, Tally(window=recorded.window, weights=given),
                     [] if records else None)  # fmt: skip
        plan.simulation = Simulation(
            strategy,
            workers=size,
            seed=SEED,
            sink=plan.keep,
            outages=pool_start(recorded, size),
            waiting=plan.tally.waiting,
        )
        plans.append(plan)
    actual = plans[0]
    timeline = Timeline(actual.tally.waiting)
    for page in recorded.pages():
        for job, start, finish in page:
            if start is not None and finish is not None:  # the actual run: what started
                timeline.add(job.tenant, job.arrival, start, finish)
                actual.keep(Record(job, start, finish, 0))
        for plan in plans[1:]:
            assert plan.simulation is not None
            plan.simulation.feed([job for job, _, _ in page])
        if progress is not None:
            for plan in plans[1:]:
                progress(plan.name, plan.tally.jobs)
    timeline.close()
    for plan in plans[1:]:
        assert plan.simulation is not None
        plan.simulation.close()
        if progress is not None:
            progress(plan.name, plan.tally.jobs)
    return [_run(plan) for plan in plans]


def pool_start(recorded: Recorded, workers: int) -> list[Outage]:
    """The replay's workers take no job before the first recorded start: the real pool was not
    up yet, or busy with jobs of before the window, which the replay does not have."""
    first = recorded.first_start if math.isfinite(recorded.first_start) else 0.0
    return [Outage(frozenset(range(workers)), 0.0, first)] if first > 0 else []


def _run(plan: _Plan) -> Run:
    tally = plan.tally
    found = tally.figures(plan.workers)
    firsts = tally.first_starts()
    rows = {
        t: TenantRow(
            jobs=w.jobs,
            p50=w.p50,
            p99=w.p99,
            max=w.max,
            share=found.contended_share.get(t, 0.0),
            first_start=firsts[t],
        )
        for t, w in found.per_tenant.items()
    }
    return Run(
        name=plan.name,
        workers=plan.workers,
        weights=plan.weights,
        records=plan.records or [],
        figures=found,
        tenants=rows,
        mean_run=tally.busy / tally.jobs if tally.jobs else 0.0,
    )


# -- the figures ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TenantRow:
    jobs: int
    p50: float
    p99: float
    max: float
    share: float  # of the worker time while two or more tenants were backlogged
    first_start: float  # from the tenant's first arrival to its first start


@dataclass(frozen=True, kw_only=True)
class Fidelity:
    """The as-is replay against what happened: simulated ÷ real, and one error figure, the
    largest of |simulated - real| over makespan and the overall p50 and p99 wait, each
    relative to the real value (a wait shorter than the mean run is counted as one mean run:
    below that a wait is noise)."""

    makespan: float
    wait_p50: float
    wait_p99: float
    error: float
    tenants: dict[str, dict[str, float | None]]  # tenant -> p50, p99: simulated ÷ real


def fidelity(actual: Run, as_is: Run) -> Fidelity | None:
    real, sim = actual.figures, as_is.figures
    if not actual.figures.jobs:
        return None
    floor = max(actual.mean_run, 1e-6)
    pairs = [
        (real.makespan, sim.makespan, floor),
        (real.waits.p50, sim.waits.p50, floor),
        (real.waits.p99, sim.waits.p99, floor),
    ]
    error = max(abs(s - r) / max(r, f) for r, s, f in pairs)
    rows = {
        t: {
            "p50": _ratio(sim.per_tenant[t].p50, w.p50),
            "p99": _ratio(sim.per_tenant[t].p99, w.p99),
        }
        for t, w in real.per_tenant.items()
        if t in sim.per_tenant
    }
    return Fidelity(
        makespan=_ratio(sim.makespan, real.makespan) or math.nan,
        wait_p50=_ratio(sim.waits.p50, real.waits.p50) or math.nan,
        wait_p99=_ratio(sim.waits.p99, real.waits.p99) or math.nan,
        error=error,
        tenants=rows,
    )


def _ratio(simulated: float, real: float) -> float | None:
    return simulated / real if real > 0 and math.isfinite(real) else None


def to_json(recorded: Recorded, changes: Changes, runs: Sequence[Run]) -> dict[str, Any]:
    found = fidelity(runs[0], runs[1])
    report: dict[str, Any] = _clean(
        {
            "queue": recorded.queue,
            "since": recorded.since,
            "until": recorded.until,
            "origin": recorded.origin,
            "jobs": recorded.count,
            "tenants": len(recorded.weights),
            "changes": list(changes.given),
            "notes": recorded.notes,
            "fidelity": None if found is None else vars(found),
            "runs": {
                run.name: {
                    "workers": run.workers,
                    "jobs": run.figures.jobs,
                    "wait": vars(run.figures.waits),
                    "jain": run.figures.jain_mean,
                    "gini": run.figures.gini_mean,
                    "windows": run.figures.windows,
                    "window": run.figures.window,
                    "makespan": run.figures.makespan,
                    "utilisation": run.figures.utilisation,
                    "tenants": {t: vars(row) for t, row in run.tenants.items()},
                }
                for run in runs
            },
        }
    )
    return report


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def tables(recorded: Recorded, changes: Changes, runs: Sequence[Run]) -> Group:
    """The runs side by side, the fidelity line, then the busiest tenants run by run."""
    summary = Table(
        title=f"queue {recorded.queue}: {recorded.count:,} jobs of "
        f"{len(recorded.weights):,} tenants replayed"
        + (f" with {' '.join(changes.given)}" if changes.given else ""),
        caption="waits in seconds; Jain/Gini over backlogged windows (—: never two tenants "
        "backlogged together); actual workers: the most jobs the store saw running at once",
    )
    for column in ("run", "workers", "jobs", "wait p50", "wait p99", "wait max", "Jain", "Gini",
                   "makespan", "utilisation"):  # fmt: skip
        summary.add_column(column, justify="left" if column == "run" else "right")
    for run in runs:
        f = run.figures
        summary.add_row(
            run.name,
            str(run.workers),
            f"{f.jobs:,}",
            _num(f.waits.p50),
            _num(f.waits.p99),
            _num(f.waits.max),
            _num(f.jain_mean, 3),
            _num(f.gini_mean, 3),
            _num(f.makespan),
            f"{f.utilisation:.0%}",
        )
    found = fidelity(runs[0], runs[1])
    lines: list[Any] = [summary]
    if found is not None:
        lines.append(
            Text(
                f"fidelity of the as-is replay: error {found.error:.0%} (simulated ÷ real: "
                f"makespan {_num(found.makespan, 2)}, wait p50 {_num(found.wait_p50, 2)}, "
                f"p99 {_num(found.wait_p99, 2)})"
            )
        )
    lines += [Text(f"note: {note}", style="dim") for note in recorded.notes]
    lines.append(_tenants_table(runs))
    return Group(*lines)


def _tenants_table(runs: Sequence[Run]) -> Table:
    rows = [run.tenants for run in runs]
    busiest = sorted(rows[1], key=lambda t: (-rows[1][t].jobs, t))
    shown = busiest[:_SHOWN]
    grid = Table(
        title="per tenant (the busiest; --json has every one)"
        if len(busiest) > _SHOWN
        else "per tenant",
        caption="share: of the worker time while two or more tenants were backlogged; first "
        "start: from the tenant's first arrival to its first start",
    )
    for column in ("tenant", "run", "jobs", "wait p50", "wait p99", "wait max", "share",
                   "first start"):  # fmt: skip
        grid.add_column(column, justify="left" if column in ("tenant", "run") else "right")
    for tenant in shown:
        for n, (run, found) in enumerate(zip(runs, rows, strict=True)):
            row = found.get(tenant)
            if row is None:
                continue
            grid.add_row(
                Text(tenant if n == 0 else ""),
                run.name,
                f"{row.jobs:,}",
                _num(row.p50),
                _num(row.p99),
                _num(row.max),
                f"{row.share:.1%}",
                _num(row.first_start),
                end_section=n == len(runs) - 1,
            )
    return grid


def _num(value: float | None, digits: int = 1) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.{digits}f}"
