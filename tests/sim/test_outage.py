"""A hung pool in the simulator (``Outage``), and the true blast radius of fairq's sharding.

docs/sharding.md once said a hung pool hurts only the tenants with all their shards there.
Placement (``fairq.policy.shards.least_loaded``, as every store applies it) only leaves a shard
once it looks busier than the tenant's others, so a tenant with one shard there has the jobs
placed there before that wait out the whole hang. These tests pin what the docs now say.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fairq.cli import cli
from fairq.cli import simulate as _registers  # noqa: F401  (registers the command)
from fairq.policy.shards import tenant_shards
from fairq.sim.engine import Outage, SimJob, simulate
from fairq.sim.metrics import held
from fairq.sim.strategies import build


def _jobs(tenant: str, arrivals: list[float], first_id: int = 0) -> list[SimJob]:
    return [
        SimJob(id=first_id + i, arrival=a, tenant=tenant, duration=1.0, cost=1.0)
        for i, a in enumerate(arrivals)
    ]


def test_workers_in_an_outage_take_no_job_until_it_ends() -> None:
    jobs = _jobs("t", [0.0, 0.0, 0.0, 5.0, 20.0])
    down = Outage(workers=frozenset({0}), start=0.0, end=10.0)
    records = simulate(jobs, build("fifo", {}), workers=2, seed=1, outages=[down])
    assert sorted((r.start, r.worker) for r in records) == [
        (0.0, 1),
        (1.0, 1),
        (2.0, 1),
        (5.0, 1),
        (20.0, 0),
    ]


def test_a_pool_that_comes_back_takes_what_waited_for_it() -> None:
    """One shard, one worker: everything waits for the end of the outage, then runs."""
    down = Outage(workers=frozenset({0}), start=0.0, end=50.0)
    records = simulate(_jobs("t", [0.0, 1.0]), build("fifo", {}), workers=1, seed=1, outages=[down])
    assert sorted(r.start for r in records) == [50.0, 51.0]
    assert held(records, down).jobs == 2


def test_a_tenant_with_one_shard_in_a_hung_pool_has_a_job_stuck_there() -> None:
    """4 shards, 2 per tenant, a worker per shard. The pool of the tenant's best shard hangs
    for 1,000 s; it enqueues 6 jobs 10 s apart. The first finds both shards empty and goes to
    its best shard (the tie-break), where it waits out the whole hang; the 5 after it see a
    job waiting there and go to the other, which serves them at once."""
    first, second = tenant_shards("sim", "acme", 4, 2)
    down = Outage(workers=frozenset({first}), start=0.0, end=1000.0)
    jobs = _jobs("acme", [0.0, 10.0, 20.0, 30.0, 40.0, 50.0])
    records = simulate(
        jobs, build("fairq:shards=4,shard_size=2", {}), workers=4, seed=1, outages=[down]
    )
    stuck = held(records, down)
    assert (stuck.jobs, stuck.tenants, stuck.arrived) == (1, {"acme": 1}, {"acme": 6})
    assert stuck.worst_wait == 1000.0
    assert sorted(r.worker for r in records) == [second] * 5 + [first]


def test_a_tenant_with_none_of_its_shards_there_is_untouched() -> None:
    shards = {t: tenant_shards("sim", t, 4, 2) for t in (f"t{n}" for n in range(40))}
    hung = shards["t0"][0]
    stranger = next(t for t, s in shards.items() if hung not in s)
    down = Outage(workers=frozenset({hung}), start=0.0, end=1000.0)
    jobs = _jobs("t0", [0.0, 10.0]) + _jobs(stranger, [0.0, 10.0, 20.0], first_id=2)
    records = simulate(
        jobs, build("fairq:shards=4,shard_size=2", {}), workers=4, seed=1, outages=[down]
    )
    assert held(records, down).tenants == {"t0": 1}
    assert max(r.wait for r in records if r.job.tenant == stranger) == 0.0


def test_the_json_counts_what_an_outage_held() -> None:
    args = [
        "simulate",
        "-w",
        "many-small",
        "-p",
        "tenants=40",
        "-p",
        "per_tenant=5",
        "-p",
        "duration=1",
        "--workers",
        "8",
        "--strategies",
        "fairq:shards=4,shard_size=2",
        "--outage",
        "0,4@20-80",
        "--json",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.output)["strategies"]["fairq:shards=4,shard_size=2"]["held"]
    assert found["jobs"] > 0 and found["worst_wait"] > 30.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0,8", "write WORKERS@FROM-TO, e.g. --outage 0,8@60-240"),
        ("a@1-2", "write WORKERS@FROM-TO"),
        ("0@5-1", "FROM before TO"),
        ("9@1-2", "workers are numbered 0 to 7"),
    ],
)
def test_a_bad_outage_says_what_to_write(text: str, message: str) -> None:
    result = CliRunner().invoke(cli, ["simulate", "--outage", text])
    assert result.exit_code == 2 and message in result.output
