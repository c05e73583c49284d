"""Long jobs are charged as they run: each heartbeat charges the time a job has run beyond what
its tenant already paid, so a tenant whose jobs take long stops looking cheap before they end."""

from __future__ import annotations

from fairq.contract import Backend, HeartbeatParams
from fairq.job import Lease

from .helpers import ack, enqueue, new_jobs, set_tenant, stat, take, take_one


def start_a_long_job(backend: Backend) -> Lease:
    """a and b backlogged; a's first job starts at 0 and runs long, b's first ends at 1.
    Every job is charged its declared 1 s (``learn_cost=False``), so the tags below are the
    heartbeats' arithmetic alone."""
    enqueue(backend, new_jobs("a", range(10), lease=100.0, learn_cost=False))
    enqueue(backend, new_jobs("b", range(10, 40), lease=100.0, learn_cost=False))
    long_job, short_job = take(backend, 0.0, limit=2)
    assert (long_job.tenant, short_job.tenant) == ("a", "b")
    ack(backend, short_job, 1.0)
    return long_job


def test_without_heartbeats_a_running_long_job_looks_cheap(backend: Backend) -> None:
    start_a_long_job(backend)
    assert take_one(backend, 10.0).tenant == "a"


def test_a_heartbeated_long_job_costs_its_tenant_its_turn_before_it_ends(
    backend: Backend,
) -> None:
    long_job = start_a_long_job(backend)
    backend.heartbeat(HeartbeatParams(tokens=[long_job.token], now=10.0))
    # a has been charged 10 s (its tag is 10); b's tag grows 1 per job from 1.
    tenants = [lease.tenant for lease in take(backend, 10.0, limit=10)]
    assert tenants == ["b"] * 9 + ["a"]


def test_heartbeats_charge_only_new_time_and_the_end_of_run_only_the_rest(
    backend: Backend,
) -> None:
    long_job = start_a_long_job(backend)
    for now in (4.0, 10.0, 10.0, 7.0):  # a repeated or out-of-order beat charges nothing more
        backend.heartbeat(HeartbeatParams(tokens=[long_job.token], now=now))
    ack(backend, long_job, 12.0)  # 12 s in all: 2 more than the heartbeats charged
    tenants = [lease.tenant for lease in take(backend, 12.0, limit=13)]
    assert tenants == ["b"] * 11 + ["a", "b"]


def test_a_heartbeat_within_the_estimate_changes_nothing(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3), lease=100.0, cost=5.0))
    enqueue(backend, new_jobs("b", range(10, 13), lease=100.0, cost=5.0))
    first = take_one(backend, 0.0)
    before = stat(backend, first.tenant).usage
    backend.heartbeat(HeartbeatParams(tokens=[first.token], now=4.0))
    assert stat(backend, first.tenant).usage == before
    assert [lease.tenant for lease in take(backend, 4.0, limit=2)] == ["b", "a"]


def test_a_heartbeat_charge_follows_the_weight(backend: Backend) -> None:
    set_tenant(backend, "a", weight=4.0)
    long_job = start_a_long_job(backend)
    backend.heartbeat(HeartbeatParams(tokens=[long_job.token], now=10.0))
    # a: 0.25 at dispatch, then (10 - 1) / 4 more: its tag is 2.5 (not 10); b's are 1, 2, 3.
    tenants = [lease.tenant for lease in take(backend, 10.0, limit=4)]
    assert tenants == ["b", "b", "a", "a"]
