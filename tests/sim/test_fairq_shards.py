"""fairq's own shuffle sharding in the simulator (``fairq:shards=n,shard_size=k``): the
reference model chooses each job's shard, worker i serves shard i % n, fairly within it."""

from __future__ import annotations

import random

import pytest

from fairq.cli.simulate import split_specs
from fairq.errors import ConfigError
from fairq.policy.shards import tenant_shards
from fairq.sim.engine import SimJob, simulate
from fairq.sim.strategies import build
from fairq.sim.workloads import flood


def test_a_tenants_jobs_run_only_on_its_shards_pools() -> None:
    jobs = [SimJob(id=i, arrival=0.0, tenant="acme", duration=1.0, cost=1.0) for i in range(40)]
    records = simulate(jobs, build("fairq:shards=4,shard_size=2", {}), workers=8, seed=1)
    assert {r.worker % 4 for r in records} == set(tenant_shards("sim", "acme", 4, 2))


def test_a_flood_idles_the_pools_of_the_other_shards() -> None:
    """The trade-off: 2,000 jobs of one tenant, 8 pools, 2 of them its own: it takes four
    times as long as unsharded fairq, which keeps all 8 workers busy."""
    workload = flood(random.Random(1), jobs=2_000, small=0)
    sharded = simulate(workload.jobs, build("fairq:shards=8,shard_size=2", {}), workers=8, seed=1)
    plain = simulate(workload.jobs, build("fairq", {}), workers=8, seed=1)
    assert max(r.finish for r in sharded) == 4 * max(r.finish for r in plain)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fairq:shards=0", "shards must be a whole number of at least 1"),
        ("fairq:shards=4,shard_size=5", "shard_size=5 is more than shards=4"),
        ("fairq:shards=2.5", "shards must be a whole number"),
    ],
)
def test_bad_shard_settings(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build(spec, {})


def test_a_pool_per_shard_needs_a_worker_per_shard() -> None:
    with pytest.raises(ConfigError, match="needs a worker per shard"):
        simulate([], build("fairq:shards=16", {}), workers=8, seed=1)


def test_settings_of_one_strategy_stay_together() -> None:
    given = "fairq,fairq:shards=8,shard_size=2, sharding:shards=8,per_tenant=2,fifo"
    assert split_specs(given) == [
        "fairq", "fairq:shards=8,shard_size=2", "sharding:shards=8,per_tenant=2", "fifo",
    ]  # fmt: skip
