"""Reading a store's history into a trace (fairq/sim/replay.py), against real stores: each store
records a workload run by its own scheduler on the virtual clock, so every recorded time is
known, and a replay of it as it ran must find each job's wait again."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from fairq.contract import AckManyParams, DequeueParams, EnqueueParams, TenantSettingsParams
from fairq.errors import ConfigError
from fairq.job import NewJob
from fairq.model import ReferenceModel
from fairq.policy.rate import Rate
from fairq.sim import whatif
from fairq.sim.replay import export, read_history
from fairq.sim.workloads import load_trace

from .recording import KINDS, QUEUE, jobs_of, opened, record


def flood(seed: int = 3) -> list[tuple[float, str, float]]:
    """A tenant's 120 one-second jobs at once; three others trickle 6 each in meanwhile."""
    rng = random.Random(seed)
    rows = [(0.0, "flood", 1.0) for _ in range(120)]
    for s in range(3):
        rows += [(round(rng.uniform(0, 30), 3), f"small-{s}", 1.0) for _ in range(6)]
    return rows


@pytest.mark.parametrize("kind", KINDS)
def test_the_as_is_replay_finds_every_recorded_wait_again(kind: str, tmp_path: Path) -> None:
    jobs = jobs_of(flood())
    with opened(kind, tmp_path) as (_, backend):
        ran = record(backend, jobs, workers=3, weights={"small-1": 2.0})
        recorded = read_history(backend, QUEUE, 0.0, 1e6)

    assert len(recorded.jobs) == len(jobs) == len(recorded.actual)
    assert recorded.workers() == 3
    assert recorded.weights["small-1"] == 2.0 and recorded.weights["flood"] == 1.0
    assert recorded.estimated == 0 and recorded.notes == []
    expected = sorted((r.job.tenant, r.job.arrival, r.wait) for r in ran)
    assert sorted((r.job.tenant, r.job.arrival, r.wait) for r in recorded.actual) == expected
    runs = whatif.replay(recorded, whatif.Changes(), ["fairq"], records=True)
    assert [run.name for run in runs] == [whatif.ACTUAL, whatif.AS_IS]
    assert sorted((r.job.tenant, r.job.arrival, r.wait) for r in runs[1].records) == expected
    found = whatif.fidelity(runs[0], runs[1])
    assert found is not None and found.error == 0.0 and found.makespan == 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_unfinished_jobs_run_their_learned_cost_and_settings_come_along(
    kind: str, tmp_path: Path
) -> None:
    """Three 2-second exports finish; then one runs and two wait when the store is read: both
    kinds replay 2 s, what the store learned. Caps and rates in force are read with them."""
    with opened(kind, tmp_path) as (_, backend):
        backend.enqueue(EnqueueParams(jobs=[_new(n, "a") for n in range(6)], now=10.0))
        for at in (10.0, 12.0, 14.0):
            (lease,) = backend.dequeue(DequeueParams(queues=[QUEUE], worker_id="w", now=at)).leases
            backend.ack_many(AckManyParams(tokens=[lease.token], now=at + 2.0))
        backend.dequeue(DequeueParams(queues=[QUEUE], worker_id="w", now=16.0))
        backend.set_tenant(
            TenantSettingsParams(
                queue=QUEUE, tenant="a", now=17.0, max_running=2, rate=Rate(5, 60.0)
            )
        )
        recorded = read_history(backend, QUEUE, 0.0, 100.0)

    assert [j.duration for j in recorded.jobs] == [2.0] * 6
    assert recorded.estimated == 3 and len(recorded.actual) == 4
    assert recorded.own["a"].max_running == 2 and recorded.own["a"].rate == Rate(5, 60.0)
    assert recorded.notes == ["3 jobs had not finished: they run their learned run time"]


def _new(n: int, tenant: str) -> NewJob:
    return NewJob(
        id=f"j{n}",
        name="export",
        queue=QUEUE,
        tenant=tenant,
        payload="{}",
        run_at=0.0,
        max_attempts=1,
        lease_timeout=600.0,
        cost=9.0,
    )


def test_a_window_with_no_job_says_what_the_store_keeps() -> None:
    store = ReferenceModel()
    record(store, jobs_of([(0.0, "a", 1.0), (5000.0, "a", 1.0)]), workers=1)
    with pytest.raises(ConfigError, match="no jobs in this store"):
        read_history(store, "never", 0.0, 10.0)
    with pytest.raises(ConfigError, match=r"keeps its jobs enqueued from 1970-01-01 00:00:00 UTC"):
        read_history(store, QUEUE, 100.0, 200.0)


def test_the_export_is_a_trace_that_simulate_reads(tmp_path: Path) -> None:
    store = ReferenceModel()
    record(store, jobs_of(flood()), workers=3)
    recorded = read_history(store, QUEUE, 0.0, 1e6)
    for name in ("trace.csv", "trace.json"):
        assert export(recorded, tmp_path / name) == 138
        trace = load_trace(tmp_path / name)
        assert sorted((j.arrival, j.tenant, j.duration) for j in trace.jobs) == sorted(
            (j.arrival, j.tenant, j.duration) for j in recorded.jobs
        )
    export(recorded, tmp_path / "hashed.csv", hash_tenants=True, salt="pepper")
    with (tmp_path / "hashed.csv").open() as file:
        tenants = {row["tenant"] for row in csv.DictReader(file)}
    assert len(tenants) == 4 and not tenants & set(recorded.weights)
    assert json.loads((tmp_path / "trace.json").read_text())[0]["name"] == "task"
    with pytest.raises(ConfigError, match=r"name it \.csv or \.json"):
        export(recorded, tmp_path / "trace.txt")
