"""Who goes next: FIFO and priority within a tenant, weighted fair shares between tenants."""

from __future__ import annotations

from fairq.contract import Backend, QueueSettings, SetQueueParams

from .helpers import (
    Q,
    ack,
    enqueue,
    longest_run,
    new_job,
    new_jobs,
    set_tenant,
    stat,
    take,
    take_one,
    tenants_taken,
)


def test_one_tenant_is_served_in_enqueue_order(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(5)))
    enqueue(backend, new_jobs("a", range(5, 10)), now=1.0)
    assert [take_one(backend, 2.0).job_id for _ in range(10)] == [f"j{n}" for n in range(10)]
    assert take(backend, 2.0) == []


def test_higher_priority_first_within_a_tenant_then_enqueue_order(backend: Backend) -> None:
    enqueue(
        backend,
        [
            new_job(0, priority=0),
            new_job(1, priority=5),
            new_job(2, priority=-1),
            new_job(3, priority=5),
            new_job(4, priority=0),
        ],
    )
    order = [take_one(backend).job_id for _ in range(5)]
    assert order == ["j1", "j3", "j0", "j4", "j2"]


def test_priority_orders_a_tenants_own_jobs_only(backend: Backend) -> None:
    """A high priority moves a job ahead of its tenant's other jobs, not ahead of other tenants."""
    enqueue(backend, new_jobs("a", range(4)))
    enqueue(backend, [new_job(10, "b", priority=100), new_job(11, "b", priority=100)])
    assert tenants_taken(backend, 4) == ["a", "b", "a", "b"]


def test_two_backlogged_tenants_alternate(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(20)))
    enqueue(backend, new_jobs("b", range(20, 40)))
    taken = tenants_taken(backend, 20)
    assert longest_run(taken, "a") == 1
    assert longest_run(taken, "b") == 1


def test_weights_3_to_1_give_3_to_1_over_every_window_of_40(backend: Backend) -> None:
    """Backlogged tenants get service in proportion to their weights over every short window."""
    enqueue(backend, new_jobs("a", range(400)))
    enqueue(backend, new_jobs("b", range(400, 800)))
    set_tenant(backend, "a", weight=3)
    taken = tenants_taken(backend, 400)
    for start in range(len(taken) - 40 + 1):
        share = taken[start : start + 40].count("a")
        assert 29 <= share <= 31, f"a got {share} of dequeues {start}..{start + 39}"


def test_weights_hold_when_each_run_costs_exactly_its_estimate(backend: Backend) -> None:
    """One worker, each job acked after exactly its estimated cost: shares still follow weights."""
    enqueue(backend, new_jobs("a", range(200), cost=2.0))
    enqueue(backend, new_jobs("b", range(200, 400), cost=2.0))
    set_tenant(backend, "b", weight=3)
    now, taken = 0.0, []
    for _ in range(200):
        lease = take_one(backend, now)
        now += lease.cost
        ack(backend, lease, now)
        taken.append(lease.tenant)
    for start in range(len(taken) - 40 + 1):
        share = taken[start : start + 40].count("b")
        assert 29 <= share <= 31, f"b got {share} of dequeues {start}..{start + 39}"


def test_a_tenant_idle_for_an_hour_gets_no_burst_when_it_returns(backend: Backend) -> None:
    """Idleness banks no credit: the returning tenant alternates with the busy one at once."""
    enqueue(backend, new_jobs("idle", range(3), cost=60.0, lease=120.0))
    enqueue(backend, new_jobs("busy", range(3, 300), cost=60.0, lease=120.0))
    now = 0.0
    while now < 3600 + 6 * 60:  # one worker: each job runs for exactly its estimate
        lease = take_one(backend, now)
        now += 60.0
        ack(backend, lease, now)
    enqueue(backend, new_jobs("idle", range(1000, 1030), cost=60.0, lease=120.0), now=now)
    taken = []
    for _ in range(30):
        lease = take_one(backend, now)
        now += 60.0
        ack(backend, lease, now)
        taken.append(lease.tenant)
    assert longest_run(taken, "idle") == 1, taken
    assert 14 <= taken.count("idle") <= 16, taken


def test_a_small_tenant_is_served_promptly_behind_100_000_jobs(backend: Backend) -> None:
    """However much one tenant enqueued, another's job waits one turn per backlogged tenant."""
    enqueue(backend, new_jobs("big", range(100_000)))
    assert tenants_taken(backend, 10) == ["big"] * 10
    enqueue(backend, [new_job(200_000, "small")])
    assert "small" in tenants_taken(backend, 2)
    enqueue(backend, [new_job(200_001, "small")], now=1.0)
    assert "small" in tenants_taken(backend, 2, now=1.0)


def test_a_lone_tenant_gets_every_dequeue(backend: Backend) -> None:
    """Work-conserving: with no one else waiting, weights and tags never hold a tenant back."""
    enqueue(backend, new_jobs("a", range(10)))
    set_tenant(backend, "a", weight=0.01)
    assert len(take(backend, limit=10)) == 10


def test_a_weight_changed_at_run_time_applies_to_the_next_dequeues(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(200)))
    enqueue(backend, new_jobs("b", range(200, 400)))
    assert tenants_taken(backend, 40).count("a") == 20
    set_tenant(backend, "a", weight=3)
    assert 29 <= tenants_taken(backend, 40).count("a") <= 31
    set_tenant(backend, "a", weight=None)  # back to the queue's default of 1
    assert 19 <= tenants_taken(backend, 40).count("a") <= 21


def test_fairness_is_kept_per_queue(backend: Backend) -> None:
    """Service in one queue does not count against a tenant in another."""
    enqueue(backend, new_jobs("a", range(10), queue="other"))
    assert len(take(backend, limit=10, queues=("other",))) == 10
    enqueue(backend, new_jobs("a", range(10, 14)))
    enqueue(backend, new_jobs("b", range(14, 18)))
    assert tenants_taken(backend, 4) == ["a", "b", "a", "b"]


def test_a_queue_default_weight_applies_to_tenants_without_their_own(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(200)))
    enqueue(backend, new_jobs("b", range(200, 400)))
    set_tenant(backend, "b", weight=1)
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue=Q, weight=2.0), now=0.0))
    assert stat(backend, "a").weight == 2.0
    assert 59 <= tenants_taken(backend, 90).count("a") <= 61
