"""Weight 0 pauses a tenant: its jobs stay ready, nothing is lost, and resuming gives them out
in order. Running jobs of a paused tenant end normally and are not re-charged."""

from __future__ import annotations

from fairq.contract import Backend, HeartbeatParams
from fairq.job import JobState

from .helpers import ack, enqueue, job, new_jobs, set_tenant, stat, take, take_one


def test_a_paused_tenant_keeps_its_jobs_ready_while_others_are_served(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    enqueue(backend, new_jobs("b", range(10, 13)))
    row = set_tenant(backend, "a", weight=0)
    assert (row.weight, row.ready) == (0.0, 3)
    assert [lease.tenant for lease in take(backend, 1.0, limit=10)] == ["b"] * 3
    assert take(backend, 2.0) == []
    assert [job(backend, f"j{n}").state for n in range(3)] == [JobState.READY] * 3
    row = stat(backend, "a")
    assert (row.ready, row.running, row.failed, row.weight) == (3, 0, 0, 0.0)


def test_resuming_gives_the_paused_jobs_out_in_order(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    set_tenant(backend, "a", weight=0)
    assert take(backend, 1.0, limit=5) == []
    set_tenant(backend, "a", weight=2.0, now=5.0)
    assert [lease.job_id for lease in take(backend, 5.0, limit=5)] == ["j0", "j1", "j2"]


def test_resuming_with_the_queue_default_weight_also_works(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    set_tenant(backend, "a", weight=0)
    set_tenant(backend, "a", weight=None, now=1.0)
    assert stat(backend, "a").weight == 1.0
    assert len(take(backend, 1.0, limit=5)) == 2


def test_a_paused_tenants_running_job_ends_normally_without_charge(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3), lease=100.0))
    enqueue(backend, new_jobs("b", range(10, 13), lease=100.0))
    running = take_one(backend, 0.0)
    assert running.tenant == "a"
    set_tenant(backend, "a", weight=0, now=1.0)
    result = backend.heartbeat(HeartbeatParams(tokens=[running.token], now=50.0))
    assert dict(result.deadlines) == {running.token: 150.0}
    ack(backend, running, 60.0)
    assert (stat(backend, "a").succeeded, stat(backend, "a").ready) == (1, 2)
    set_tenant(backend, "a", weight=1.0, now=60.0)
    # Not charged for the 60 s it ran while paused: a's tag is still 1, level with b's first.
    assert [lease.tenant for lease in take(backend, 60.0, limit=4)] == ["b", "a", "b", "a"]


def test_pausing_keeps_other_queues_going(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    enqueue(backend, new_jobs("a", range(10, 12), queue="other"))
    set_tenant(backend, "a", weight=0)
    assert take(backend, 0.0, limit=5) == []
    assert len(take(backend, 0.0, limit=5, queues=["other"])) == 2
