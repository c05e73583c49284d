"""The talk's comparison (``fairq simulate --verdict``): a measured number in every cell.

Weights unequal, several workers, job run times log-normal: the shares are measured where
they are hard to get right, not at one slot with equal weights.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from fairq.cli import cli
from fairq.cli import simulate as _registers  # noqa: F401  (registers the command)
from fairq.sim import verdict
from fairq.sim.engine import simulate
from fairq.sim.metrics import figures
from fairq.sim.strategies import STRATEGIES, build
from fairq.sim.strategies.lottery import sized
from fairq.sim.workloads import make

#: Three backlogged tenants at 1:3:6 with log-normal run times (medians 2, 1 and 0.5 s).
PLANS = {"backlog": "600", "batch_tenants": "0", "small": "0"}


def test_fairq_gives_weights_their_worker_seconds_at_16_slots() -> None:
    """Over the first 80 % of the time all three are backlogged (about 210 s; not up to when
    the first runs out, a moment that depends on its own luck), each tenant's share of the
    worker-seconds is within 1.5 points of its weight's: 10, 30, 60 %."""
    workload = make("mixed", 2, {**PLANS, "backlog": "3000"})
    records = simulate(workload.jobs, build("fairq", workload.weights), workers=16, seed=2)
    last = min(max(r.start for r in records if r.job.tenant == t) for t in workload.weights)
    until = 0.8 * last
    got = {t: 0.0 for t in workload.weights}  # worker-seconds while all three were backlogged
    for r in records:
        got[r.job.tenant] += max(0.0, min(r.finish, until) - r.start)
    total = sum(got.values())
    assert until > 200.0
    shares = {t: v / total for t, v in got.items()}
    for tenant, share in {"basic": 0.1, "pro": 0.3, "enterprise": 0.6}.items():
        assert abs(shares[tenant] - share) < 0.015, shares


def test_the_share_error_tells_weighted_fairness_from_turns() -> None:
    workload = make("mixed", 2, PLANS)
    error = {
        spec: figures(
            simulate(workload.jobs, build(spec, workload.weights), workers=16, seed=2),
            workers=16,
            weights=workload.weights,
        ).share_error
        for spec in ("fairq", "round-robin", "fifo")
    }
    assert error["fairq"] < 0.03 < 0.3 < error["round-robin"] < error["fifo"], error


def test_the_planner_sized_to_the_pool_keeps_it_busy_where_its_defaults_idle_it() -> None:
    workload = make(
        "mixed",
        3,
        {"backlog": "300", "batch_tenants": "1", "batch": "120", "small": "10", "per_small": "10"},
    )
    mean = sum(j.duration for j in workload.jobs) / len(workload.jobs)
    spec = sized(16, mean)
    assert spec == "lottery:per_round=16,interval=1,threshold=1"
    found = {
        s: figures(
            simulate(workload.jobs, build(s, workload.weights), workers=16, seed=3),
            workers=16,
            weights=workload.weights,
        )
        for s in ("lottery", spec)
    }
    assert found["lottery"].efficiency < 0.5 < 0.95 < found[spec].efficiency
    assert found[spec].makespan < found["lottery"].makespan / 2


def test_the_verdict_runs_every_strategy_and_both_planners() -> None:
    workload = make("batches", 1, {})
    specs = verdict.specs(workload, 8)
    assert {s.partition(":")[0] for s in specs} == set(STRATEGIES)
    assert (
        "lottery" in specs
        and sized(8, sum(j.duration for j in workload.jobs) / len(workload.jobs)) in specs
    )
    assert "fairq" in specs and "fairq:slice=30" in specs
    assert "sharding" not in verdict.specs(workload, 3)  # a worker per shard, or none


def test_simulate_verdict_prints_one_number_per_cell_and_json() -> None:
    args = [
        "simulate",
        "--verdict",
        "-w",
        "batches",
        "-p",
        "batch_jobs=2",
        "-p",
        "batch=300",
        "-p",
        "small=6",
        "-p",
        "per_small=5",
        "--workers",
        "4",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    for heading in (
        "fair share",
        "no starvation",
        "efficiency",
        "lottery (defaults)",
        "(sized to the pool)",
        "iteration:slice=30",
        "fairq:slice=30",
    ):
        assert heading in result.output
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert set(found["columns"]) == {"share_error", "starvation", "efficiency", "makespan_ratio"}
    rows = found["strategies"]
    assert len(rows) == len(verdict.specs(make("batches", 1, {}), 4))
    assert rows["fairq"]["starvation"] > 250.0 > 31.0 > rows["fairq:slice=30"]["starvation"]
    assert all(0.0 <= row["efficiency"] <= 1.0 for row in rows.values())
