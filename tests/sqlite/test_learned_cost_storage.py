"""Learned costs and claims in the SQLite file: a store of the schema before them (version 11)
upgrades in place with its jobs, and the new columns round-trip."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fairq.backends.clock import Clock
from fairq.backends.sqlite import SQLiteBackend
from fairq.backends.sqlite.sql import LATEST_VERSION, migrations
from fairq.contract import (
    AckManyParams,
    CheckpointParams,
    DequeueParams,
    EnqueueParams,
    HeartbeatParams,
    JobCost,
    JobCostsParams,
    JobType,
    MaintainParams,
    PublishJobTypesParams,
    StatsParams,
)
from fairq.job import Lease, NewJob
from fairq.model import ReferenceModel
from tests.sqlite.helpers import raw_connect
from tests.sqlite.test_schema import EXPECTED_OBJECTS, meta, schema_of

BEFORE = 11  # the last schema without learned costs

# A store as version 11 left it: tenant "a" enqueued "run", "stuck" and "next" (declared cost
# 2 s) at 0 and had the first two handed out at 0 by a native worker; "stuck"'s lease ends at
# 10. F = 4 after the two dispatches (each charged 2), V = 2. "task" was published.
VERSION_11_ROWS = [
    "INSERT INTO fairq_meta VALUES ('application', 'fairq'), ('schema_version', '11')",
    "INSERT INTO queues (name, vclock) VALUES ('default', 2.0)",
    "INSERT INTO tenants (id, queue, tenant, weight, finish_tag, start_tag, head_seq, ready,"
    " running, usage, usage_at) VALUES (1, 'default', 'a', 1.0, 4.0, 4.0, 3, 1, 2, 4.0, 0.0)",
    "INSERT INTO jobs (seq, id, tenant_id, queue, name, state, payload, priority, attempts,"
    " max_attempts, lease_timeout, cost, enqueued_at, run_at, ready_at, started_at, deadline,"
    " worker_id, leases, charged) VALUES"
    " (1, 'run', 1, 'default', 'task', 'running', '{}', 0, 1, 3, 30.0, 2.0, 0, 0, 0, 0, 30.0,"
    "  'w', 1, 2.0),"
    " (2, 'stuck', 1, 'default', 'task', 'running', '{}', 0, 1, 3, 10.0, 2.0, 0, 0, 0, 0, 10.0,"
    "  'w', 1, 2.0),"
    " (3, 'next', 1, 'default', 'task', 'ready', '{}', 0, 0, 3, 30.0, 2.0, 0, 0, 0, NULL, NULL,"
    "  NULL, 0, 0.0)",
    "INSERT INTO job_types (name, queue, tenant_arg, params, max_attempts, lease_timeout, cost,"
    " throttle) VALUES ('task', 'default', 'account', '[\"account\"]', 3, 30.0, 2.0, '[]')",
]


def version_11_store(path: Path) -> None:
    with raw_connect(path) as db:
        for _, statements in migrations()[:BEFORE]:
            for statement in statements:
                db.execute(statement)
        for statement in VERSION_11_ROWS:
            db.execute(statement)


def take(backend: SQLiteBackend, now: float) -> list[Lease]:
    return list(backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases)


def test_a_version_11_store_upgrades_and_runs_its_jobs_learning_their_cost(
    db_path: Path,
) -> None:
    """Its jobs learn their cost, and the running ones, handed to native workers, are
    claimed: an ack is a sample, an expiry a counted failure."""
    version_11_store(db_path)
    backend = SQLiteBackend(db_path, clock=Clock.CALLER)
    try:
        assert meta(db_path)["schema_version"] == str(LATEST_VERSION)
        assert schema_of(db_path) == EXPECTED_OBJECTS
        assert backend.job_costs(JobCostsParams()) == []
        assert backend.job_types()["task"].learn_cost is True
        assert backend.ack_many(AckManyParams(tokens=["run:1"], now=0.5)).acked == ["run:1"]
        learned = [JobCost(queue="default", name="task", runs=1, estimate=0.5)]
        assert backend.job_costs(JobCostsParams()) == learned  # the old lease's run: a sample
        (lease,) = take(backend, 1.0)
        assert (lease.job_id, lease.cost) == ("next", 0.5)  # the learned time, not its cost 2
        backend.ack_many(AckManyParams(tokens=[lease.token], now=1.25))
        assert backend.job_costs(JobCostsParams())[0].runs == 2
        (expired,) = backend.maintain(MaintainParams(now=10.0)).expired
        assert (expired.job_id, expired.claimed, expired.attempt) == ("stuck", True, 1)
        (row,) = backend.stats(StatsParams(now=10.0))
        assert (row.ready, row.running, row.succeeded, row.failed) == (1, 0, 2, 1)
        (again,) = take(backend, 10.0)
        assert (again.job_id, again.attempt, again.cost) == ("stuck", 2, 0.375)
        backend.ack_many(AckManyParams(tokens=[again.token], now=10.5))
        assert backend.job_costs(JobCostsParams())[0].runs == 3
    finally:
        backend.close()


def test_a_published_job_type_keeps_learn_cost(backend: SQLiteBackend) -> None:
    fixed = JobType(
        name="call_api",
        queue="default",
        tenant_arg="account",
        params=("account",),
        max_attempts=3,
        lease_timeout=30.0,
        cost=4.0,
        learn_cost=False,
    )
    backend.publish_job_types(PublishJobTypesParams(types=[fixed]))
    assert backend.job_types() == {"call_api": fixed}
    learning = replace(fixed, learn_cost=True)
    backend.publish_job_types(PublishJobTypesParams(types=[learning]))
    assert backend.job_types()["call_api"].learn_cost is True


def test_plain_heartbeats_and_checkpoints_charge_only_claimed_runs(
    backend: SQLiteBackend,
) -> None:
    """An unclaimed lease kept by a plain heartbeat or a checkpoint (not the relay's hold) is
    still waiting in a broker: no service is charged until a worker claims it; then its run
    is charged from the claim. The model is the reference, compared with ``==``."""
    model = ReferenceModel()
    for store in (backend, model):
        job = NewJob(
            id="j",
            name="task",
            queue="default",
            tenant="a",
            payload="{}",
            run_at=0.0,
            max_attempts=3,
            lease_timeout=30.0,
            cost=1.0,
        )
        store.enqueue(EnqueueParams(jobs=[job], now=0.0))
        params = DequeueParams(queues=["default"], worker_id="relay", now=0.0, hold=5.0)
        (lease,) = store.dequeue(params).leases
        usage = store.stats(StatsParams())[0].usage  # as recorded, not decayed
        store.heartbeat(HeartbeatParams(tokens=[lease.token], now=4.0))  # 4 s > its 1 s estimate
        store.checkpoint(CheckpointParams(token=lease.token, now=8.0, progress='{"cursor":1}'))
        assert store.stats(StatsParams())[0].usage == usage  # nothing charged yet
        store.heartbeat(HeartbeatParams(tokens=[lease.token], now=9.0, claim=True))
        store.heartbeat(HeartbeatParams(tokens=[lease.token], now=12.0))  # ran 3 s: charged
    assert backend.stats(StatsParams(now=12.0)) == model.stats(StatsParams(now=12.0))
    assert backend.stats(StatsParams())[0].usage > usage
