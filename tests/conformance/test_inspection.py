"""What a store shows: per-tenant stats, jobs, published job types, retention, exact tenant ids."""

from __future__ import annotations

import threading

import pytest

from fairq.contract import (
    Backend,
    FailParams,
    GetJobsParams,
    JobType,
    MaintainParams,
    PublishJobTypesParams,
    StatsParams,
    TenantStats,
    WaitParams,
)
from fairq.contract.jobtypes import JobSignature
from fairq.errors import DuplicateJob
from fairq.job import JobState

from .helpers import (
    Q,
    ack,
    enqueue,
    job,
    new_job,
    new_jobs,
    set_tenant,
    snapshot,
    stat,
    take,
    take_one,
)


def test_stats_count_every_state_per_tenant(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(6), max_attempts=1), now=1.0)
    enqueue(backend, [new_job(6, "a", run_at=100.0), new_job(7, "b")], now=2.0)
    leases = take(backend, 3.0, limit=4)
    assert [lease.tenant for lease in leases] == ["a", "b", "a", "a"]
    ack(backend, leases[0], 4.0)
    backend.fail(FailParams(token=leases[2].token, now=4.0, error="x", retry_at=None))
    row = stat(backend, "a")
    assert row == TenantStats(
        queue=Q, tenant="a", weight=1.0, max_running=None,
        ready=3, scheduled=1, running=1, succeeded=1, failed=1, dead=1,
        oldest_ready_at=1.0, rate=None, limited_until=None, usage=row.usage,
    )  # fmt: skip
    assert row.usage > 0  # its runs were charged (the exact figure: tests/conformance/test_history)
    assert stat(backend, "b").running == 1
    assert stat(backend, "b").oldest_ready_at is None


def test_oldest_ready_at_is_when_the_longest_waiting_ready_job_became_ready(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", run_at=1.0)], now=1.0)
    enqueue(backend, [new_job(1, "a", run_at=2.0)], now=2.0)
    assert stat(backend, "a").oldest_ready_at == 1.0
    take_one(backend, 3.0)
    assert stat(backend, "a").oldest_ready_at == 2.0
    take_one(backend, 3.0)
    assert stat(backend, "a").oldest_ready_at is None


def test_a_promoted_job_has_been_ready_since_its_run_at_not_since_it_was_promoted(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", run_at=5.0)], now=1.0)
    assert stat(backend, "a").oldest_ready_at is None
    backend.maintain(MaintainParams(now=9.0))
    assert stat(backend, "a").oldest_ready_at == 5.0


def test_stats_rows_are_sorted_by_queue_then_tenant_and_filter(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "b"), new_job(1, "a"), new_job(2, "a", queue="x")])
    set_tenant(backend, "c", queue="x", weight=2.0)
    rows = [(row.queue, row.tenant) for row in backend.stats(StatsParams())]
    assert rows == [("default", "a"), ("default", "b"), ("x", "a"), ("x", "c")]
    assert [r.queue for r in backend.stats(StatsParams(tenant="a"))] == ["default", "x"]
    assert [r.tenant for r in backend.stats(StatsParams(queue="x"))] == ["a", "c"]
    assert backend.stats(StatsParams(queue="nope")) == []


def test_get_jobs_returns_the_jobs_that_exist_in_the_order_asked(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", priority=3), new_job(1, "b", run_at=9.0)], now=2.0)
    found = backend.get_jobs(GetJobsParams(ids=["j1", "nope", "j0"]))
    assert [info.id for info in found] == ["j1", "j0"]
    j1, j0 = found
    assert (j0.name, j0.queue, j0.tenant, j0.state, j0.priority) == (
        "task",
        Q,
        "a",
        JobState.READY,
        3,
    )
    assert (j0.payload, j0.attempts, j0.max_attempts) == ('{"args":[0],"kwargs":{}}', 0, 3)
    assert (j0.enqueued_at, j0.run_at, j0.started_at, j0.finished_at) == (2.0, 0.0, None, None)
    assert (j0.deadline, j0.last_error) == (None, None)
    assert (j1.state, j1.run_at) == (JobState.SCHEDULED, 9.0)


def test_published_job_types_round_trip(backend: Backend) -> None:
    assert backend.job_types() == {}
    types = [
        JobType(name="imports.run", queue="imports", tenant_arg="account", params=("account", "n"),
                max_attempts=5, lease_timeout=120.0, cost=3.5,
                signature=JobSignature(positional_only=1, required=1, var_positional=True,
                                       keyword_only={"dry_run": False, "ünïcode": True},
                                       var_keyword=True)),
        JobType(name="mail", queue=Q, tenant_arg=None, params=(), max_attempts=1,
                lease_timeout=60.0, cost=1.0),
    ]  # fmt: skip
    backend.publish_job_types(PublishJobTypesParams(types=types))
    assert backend.job_types() == {t.name: t for t in types}
    changed = JobType(name="mail", queue="mail", tenant_arg="to", params=("to",), max_attempts=2,
                      lease_timeout=5.0, cost=0.5, learn_cost=False)  # fmt: skip
    backend.publish_job_types(PublishJobTypesParams(types=[changed]))
    assert backend.job_types()["mail"] == changed
    assert backend.job_types()["imports.run"] == types[0]


def test_retention_prunes_old_succeeded_jobs_only(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a"), new_job(1, "a", max_attempts=1), new_job(2, "a")])
    ack(backend, take_one(backend, 0.0), 10.0)
    backend.fail(
        FailParams(token=take_one(backend, 10.0).token, now=10.0, error="x", retry_at=None)
    )
    assert backend.maintain(MaintainParams(now=50.0, retention=100.0)).pruned == 0
    assert backend.maintain(MaintainParams(now=50.0)).pruned == 0
    assert backend.maintain(MaintainParams(now=200.0, retention=100.0)).pruned == 1
    assert [info.id for info in backend.get_jobs(GetJobsParams(ids=["j0", "j1", "j2"]))] == [
        "j1",
        "j2",
    ]
    assert stat(backend, "a").succeeded == 1  # a lifetime counter survives pruning


AWKWARD_TENANTS = [
    "a",
    "a:b",
    "a:b:c",
    ":",
    "a:",
    ":a",
    "{a}",
    "{a",
    "a}",
    '"quoted"',
    "'single'",
    "it's",
    "with space",
    "with  space",
    " leading",
    "trailing ",
    "ünïcødé",
    "u\u0308",  # u + combining diaeresis: not normalised to ü
    "ü",
    "日本語テナント",
    "emoji 🚀",
    "back\\slash",
    "percent%s%d",
    "new\nline",
    "tab\there",
    "*",
    "?",
    "[a]",
    "a%",
    "a_",
    "DROP TABLE jobs; --",
    "t" * 10_000,
    "t" * 9_999,
    "t" * 9_999 + "u",
]


def test_awkward_tenant_ids_are_stored_and_returned_exactly_and_never_confused(
    backend: Backend,
) -> None:
    tenants = AWKWARD_TENANTS
    assert len(set(tenants)) == len(tenants)
    enqueue(backend, [new_job(n, t) for n, t in enumerate(tenants)])
    for n, tenant in enumerate(tenants):
        set_tenant(backend, tenant, weight=float(n + 1))
    rows = backend.stats(StatsParams())
    assert [row.tenant for row in rows] == sorted(tenants)
    for n, tenant in enumerate(tenants):
        row = stat(backend, tenant)
        assert (row.tenant, row.weight, row.ready) == (tenant, float(n + 1), 1)
        assert job(backend, f"j{n}").tenant == tenant
    leases = take(backend, limit=len(tenants) + 1)
    assert sorted((lease.tenant, lease.job_id) for lease in leases) == sorted(
        (t, f"j{n}") for n, t in enumerate(tenants)
    )
    for lease in leases:
        ack(backend, lease, 1.0)
    assert all(row.succeeded == 1 and row.running == 0 for row in backend.stats(StatsParams()))


def test_an_enqueue_with_a_duplicate_id_stores_nothing_of_its_batch(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    before = snapshot(backend, ["j0", "j1", "j2"])
    with pytest.raises(DuplicateJob):
        enqueue(backend, [new_job(1, "b"), new_job(0, "b"), new_job(2, "b")], now=1.0)
    with pytest.raises(DuplicateJob):
        enqueue(backend, [new_job(1, "b"), new_job(1, "b")], now=1.0)
    assert snapshot(backend, ["j0", "j1", "j2"]) == before


def test_wait_returns_by_its_timeout(backend: Backend) -> None:
    """With nothing arriving, each wait ends by its timeout (0 too: it must not mean "for
    ever", as BLPOP's 0 does); a wait that ignored it would still be running at the join."""
    for timeout in (0.0, 0.05):
        waiter = threading.Thread(
            target=backend.wait,
            args=(WaitParams(queues=["default"], timeout=timeout),),
            daemon=True,
        )
        waiter.start()
        waiter.join(30.0)
        assert not waiter.is_alive(), f"wait(…, {timeout}) did not end by its timeout"
