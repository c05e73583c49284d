"""The talk's comparison, measured: each strategy x {fair share, no starvation, efficiency}.

"Prioritization justice" ends with a table of ticks and crosses; ``fairq simulate --verdict``
puts a number in every cell, from one run of each strategy on the same jobs and workers
(``fairq.sim.metrics`` defines them):

* **fair share**: the share error, the part of all worker-seconds that went to a tenant beyond
  its weighted fair share while another tenant wanted them (0 % is fair by weight);
* **no starvation**: the longest time any tenant had a job waiting while none of its jobs ran;
* **efficiency**: the worker-seconds used over those the work could have used (100 %: no
  worker ever idle while a job waited); beside it, the makespan over the shortest possible.

By default it runs every strategy, the planner twice: at the gem's defaults and sized to the
pool (``lottery.sized``), and fairq twice: plain and with every job iterative (30-s slices).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from fairq.sim.compare import Outcome
from fairq.sim.strategies import STRATEGIES, lottery
from fairq.sim.workloads import Workload

SLICE = 30.0  # App.iterative_job's default slice, and the iteration model's
COLUMNS = {
    "share_error": "fair share: worker-seconds given beyond a tenant's weighted share while "
    "another wanted them, over all worker-seconds (0 % is fair)",
    "starvation": "no starvation: the longest any tenant had a job waiting and none running (s)",
    "efficiency": "efficiency: worker-seconds used over those the work could have used "
    "(100 %: no worker idle while a job waited)",
    "makespan_ratio": "makespan over the shortest any schedule could have",
}


def specs(workload: Workload, workers: int) -> list[str]:
    """Every strategy, in the talk's order where it has one; the planner at its defaults and
    sized to the pool; fairq plain and iterative; sharding only with a worker per shard."""
    mean = sum(j.duration for j in workload.jobs) / max(len(workload.jobs), 1)
    chosen = [
        "sharding", f"iteration:slice={SLICE:g}", "throttled", "fairq", f"fairq:slice={SLICE:g}",
        "lottery", lottery.sized(workers, mean), "fifo", "round-robin", "decayed", "slots",
    ]  # fmt: skip
    assert {s.partition(":")[0] for s in chosen} == set(STRATEGIES)  # every one, once or twice
    return [s for s in chosen if s != "sharding" or workers >= 4]  # 4 shards by default


def _label(spec: str) -> str:
    if spec == "lottery":
        return "lottery (defaults)"
    if spec.startswith("lottery:"):
        return f"{spec} (sized to the pool)"
    return spec


def table(workload: Workload, outcomes: Sequence[Outcome], *, workers: int) -> Table:
    grid = Table(
        title=f"{workload.name}: {len(workload.jobs):,} jobs, {workers} workers — the talk's "
        "table, measured",
        caption="fair share: worker-s given beyond a tenant's weighted share while another "
        "wanted them; no starvation: longest time a tenant had a job waiting and none running; "
        "efficiency: worker-s used / worker-s the work could have used (docs/strategies.md)",
    )
    for column in ("strategy", "fair share", "no starvation", "efficiency", "makespan ÷ bound"):
        grid.add_column(column, justify="left" if column == "strategy" else "right")
    for o in outcomes:
        f = o.figures
        grid.add_row(
            _label(o.strategy),
            f"{f.share_error:.1%}",
            f"{f.starvation:,.1f} s",
            f"{f.efficiency:.1%}",
            f"{_ratio(f.makespan, f.makespan_bound):.2f}",
        )
    return grid


def _ratio(makespan: float, bound: float) -> float:
    return makespan / bound if bound > 0 else 1.0


def to_json(
    workload: Workload, outcomes: Sequence[Outcome], *, workers: int, seed: int
) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for o in outcomes:
        f = o.figures
        rows[o.strategy] = {
            "share_error": f.share_error,
            "starvation": f.starvation,
            "starved_tenant": f.starved_tenant,
            "efficiency": f.efficiency,
            "makespan": f.makespan,
            "makespan_bound": f.makespan_bound,
            "makespan_ratio": _ratio(f.makespan, f.makespan_bound),
        }
    return {
        "workload": workload.name,
        "jobs": len(workload.jobs),
        "workers": workers,
        "seed": seed,
        "weights": workload.weights,
        "columns": COLUMNS,
        "strategies": {k: {n: _finite(v) for n, v in row.items()} for k, row in rows.items()},
    }


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value
