"""The simulator's claims, measured on the reference model and the other strategies' models."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from fairq.errors import ConfigError
from fairq.sim.engine import SimJob, simulate
from fairq.sim.metrics import figures
from fairq.sim.strategies import STRATEGIES, build
from fairq.sim.strategies.lottery import Lottery
from fairq.sim.workloads import flood, make


def _backlogged(tenants: int, per_tenant: int) -> list[SimJob]:
    jobs = [(t, n) for n in range(per_tenant) for t in range(tenants)]
    return [
        SimJob(id=i, arrival=0.0, tenant=f"t{t}", duration=1.0, cost=1.0)
        for i, (t, _) in enumerate(jobs)
    ]


def test_fairq_gives_backlogged_tenants_with_equal_weights_equal_service() -> None:
    records = simulate(_backlogged(5, 400), build("fairq", {}), workers=4, seed=1)
    result = figures(records, workers=4)
    assert result.windows > 10
    assert result.jain_mean is not None and result.jain_mean > 0.999
    assert result.jain_min is not None and result.jain_min > 0.99
    assert result.max_lag < 2.0  # never more than about one job behind its share


def test_fairq_follows_plan_weights() -> None:
    workload = make("plans", seed=3, params={"per_tenant": "600"})
    records = simulate(workload.jobs, build("fairq", workload.weights), workers=10, seed=3)
    first = [r for r in records if r.start < 100]  # everyone is backlogged all this time
    share = {t: sum(1 for r in first if r.job.tenant == t) / len(first) for t in workload.weights}
    assert share == pytest.approx({"basic": 0.1, "pro": 0.3, "enterprise": 0.6}, abs=0.01)


def test_fifo_makes_a_small_tenant_wait_for_the_whole_flood() -> None:
    workload = flood(_rng(), jobs=2000, small=1, per_small=1)
    small_arrival = next(j.arrival for j in workload.jobs if j.tenant == "small-0")
    floods_before = sum(1 for j in workload.jobs if j.tenant == "flood")
    records = simulate(workload.jobs, build("fifo", {}), workers=8, seed=1)
    small = next(r for r in records if r.job.tenant == "small-0")
    flood_starts_before = sum(
        1 for r in records if r.job.tenant == "flood" and r.start <= small.start
    )
    assert flood_starts_before == floods_before  # every flood job went first
    assert small.wait > 2000 / 8 - small_arrival - 1


def test_fairq_starts_a_small_tenant_within_a_few_jobs_of_a_flood() -> None:
    workload = flood(_rng(), jobs=2000, small=1, per_small=1)
    records = simulate(workload.jobs, build("fairq", {}), workers=8, seed=1)
    small = next(r for r in records if r.job.tenant == "small-0")
    started_while_it_waited = sum(1 for r in records if small.job.arrival < r.start < small.start)
    assert started_while_it_waited <= 8  # at most one job per worker that was already busy
    assert small.wait <= 1.0


def test_lottery_round_splits_vary_as_the_binomial_predicts() -> None:
    # Two tenants weighted 1 and 3, both always backlogged: each of the 100 draws of a round
    # goes to "b" with p = 3/4, so its count per round is Binomial(100, 3/4): mean 75,
    # variance 18.75. Over 400 rounds the sample mean has a standard error of
    # sqrt(18.75/400) = 0.22, so 74.3..75.7 is a 3-sigma band; the sample variance of 400
    # draws has a relative standard error of about sqrt(2/399) = 7 %, so 15..22.5 is a band of
    # more than 2.5 sigma either side. The seed is fixed: the test is deterministic, the bands
    # say why the values it sees are the binomial's and not an accident.
    jobs = [
        SimJob(id=i, arrival=0.0, tenant=t, duration=0.01, cost=0.01)
        for i, t in enumerate(["a", "b"] * 40_000)
    ]
    lottery = Lottery(per_round=100, interval=10.0, threshold=60.0, weights={"a": 1, "b": 3})
    simulate(jobs, lottery, workers=100, seed=20240518)
    splits = [r.get("b", 0) for r in lottery.rounds[:400]]
    assert len(splits) == 400 and all(sum(r.values()) == 100 for r in lottery.rounds[:400])
    assert 74.3 < statistics.fmean(splits) < 75.7
    assert 15.0 < statistics.variance(splits) < 22.5


def test_lottery_skips_rounds_while_the_main_queue_is_late() -> None:
    jobs = _backlogged(2, 500)
    lottery = Lottery(per_round=100, interval=10.0, threshold=5.0)
    simulate(jobs, lottery, workers=1, seed=1)  # 100 one-second jobs take 100 s to drain
    assert lottery.skipped > 0
    assert all(sum(r.values()) == 100 for r in lottery.rounds)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_runs_every_job_once_and_the_same_seed_repeats_the_run(name: str) -> None:
    workload = make("bursts", seed=7, params={"bursts": "6", "size": "20"})
    first = simulate(workload.jobs, build(name, {}), workers=4, seed=11)
    again = simulate(workload.jobs, build(name, {}), workers=4, seed=11)
    assert sorted(r.job.id for r in first) == list(range(len(workload.jobs)))
    assert first == again
    assert all(
        r.start >= r.job.arrival and math.isclose(r.finish - r.start, r.job.duration) for r in first
    )


def test_the_same_seed_builds_the_same_workload_and_another_seed_another() -> None:
    assert make("many-small", 5, {"tenants": "50"}) == make("many-small", 5, {"tenants": "50"})
    assert make("many-small", 5, {"tenants": "50"}) != make("many-small", 6, {"tenants": "50"})


def test_slots_cap_a_tenant_and_reschedule_the_rest() -> None:
    records = simulate(_backlogged(1, 6), build("slots:slots=2,retry=60", {}), workers=4, seed=1)
    assert sorted(r.start for r in records) == [0.0, 0.0, 60.0, 60.0, 120.0, 120.0]


def test_sharding_confines_a_workers_pool_to_its_shard() -> None:
    records = simulate(
        _backlogged(1, 40), build("sharding:shards=4,per_tenant=1", {}), workers=8, seed=1
    )
    assert len({r.worker % 4 for r in records}) == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "unknown strategy 'nope'; choose from fairq, fifo"),
        ("fifo:slots=2", "strategy 'fifo' has no setting slots; it takes: none"),
        ("slots:slots", "bad setting 'slots' in strategy 'slots:slots': write key=number"),
    ],
)
def test_a_bad_strategy_spec_says_what_to_write(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        build(spec, {})


def _rng() -> random.Random:
    return random.Random(42)
