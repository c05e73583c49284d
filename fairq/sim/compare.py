"""Run several strategies on one workload and lay the figures out (table and JSON)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.table import Table

from fairq.sim.engine import Outage, Record, simulate
from fairq.sim.metrics import Figures, Held, figures, held
from fairq.sim.strategies import build
from fairq.sim.workloads import Workload


@dataclass(frozen=True, kw_only=True)
class Outcome:
    strategy: str
    records: list[Record]
    figures: Figures
    held: list[Held]  # per outage of the run


def compare(
    workload: Workload,
    specs: Sequence[str],
    *,
    workers: int,
    seed: int,
    outages: Sequence[Outage] = (),
    progress: Callable[[str, int], None] | None = None,
) -> list[Outcome]:
    """Every strategy in ``specs`` on the same jobs, workers and seed (built first, so a bad
    spec fails before anything runs)."""
    strategies = [build(spec, workload.weights) for spec in specs]
    outcomes: list[Outcome] = []
    for strategy in strategies:
        name = strategy.name

        def report(done: int, name: str = name) -> None:
            if progress is not None:
                progress(name, done)

        records = simulate(
            workload.jobs, strategy, workers=workers, seed=seed, outages=outages, progress=report
        )
        found = figures(
            records, workers=workers, weights=workload.weights, newcomers=workload.newcomers
        )
        stuck = [held(records, outage) for outage in outages]
        outcomes.append(Outcome(strategy=name, records=records, figures=found, held=stuck))
    return outcomes


def to_json(
    workload: Workload, outcomes: Sequence[Outcome], *, workers: int, seed: int
) -> dict[str, Any]:
    """The figures as plain JSON values (NaN, for no jobs, becomes null)."""
    return {
        "workload": workload.name,
        "jobs": len(workload.jobs),
        "workers": workers,
        "seed": seed,
        "weights": workload.weights,
        "newcomers": list(workload.newcomers),
        "strategies": {
            o.strategy: _clean({**asdict(o.figures), "held": [asdict(h) for h in o.held]})
            for o in outcomes
        },
    }


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def table(workload: Workload, outcomes: Sequence[Outcome], *, workers: int) -> Table:
    grid = Table(
        title=f"{workload.name}: {len(workload.jobs):,} jobs, {workers} workers",
        caption="waits in seconds; Jain/Gini over backlogged windows (— : no two tenants "
        "were ever backlogged together); lag: worker-seconds behind weighted fair share",
    )
    for column in (
        "strategy",
        "wait p50",
        "wait p99",
        "wait max",
        "worst tenant p50",
        "newcomer 1st start",
        "Jain",
        "Gini",
        "max lag",
        "utilisation",
        "makespan",
    ):
        grid.add_column(column, justify="left" if column == "strategy" else "right")  # fmt: skip
    for o in outcomes:
        f = o.figures
        grid.add_row(
            o.strategy,
            _num(f.waits.p50),
            _num(f.waits.p99),
            _num(f.waits.max),
            _num(f.worst_tenant_p50),
            _num(f.newcomer_first_start),
            _num(f.jain_mean, 3),
            _num(f.gini_mean, 3),
            _num(f.max_lag),
            f"{f.utilisation:.0%}",
            _num(f.makespan),
        )
    return grid


def _num(value: float | None, digits: int = 1) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.{digits}f}"
