"""Concurrency caps: a tenant never runs more than its cap and is served again when a slot frees."""

from __future__ import annotations

from fairq.contract import Backend, GetQueueParams, QueueSettings, SetQueueParams

from .helpers import Q, ack, enqueue, new_jobs, set_tenant, stat, take, take_one


def test_cap_1_never_runs_two_and_the_freed_slot_goes_to_the_capped_tenant(
    backend: Backend,
) -> None:
    """Three workers; every round each job runs for exactly its estimate and is acked."""
    enqueue(backend, new_jobs("a", range(10)))
    enqueue(backend, new_jobs("b", range(10, 100)))
    set_tenant(backend, "a", max_running=1)
    now = 0.0
    for _ in range(10):
        leases = [take_one(backend, now) for _ in range(3)]
        assert [lease.tenant for lease in leases] == ["a", "b", "b"]
        assert stat(backend, "a").running == 1
        now += 1.0
        for lease in leases:
            ack(backend, lease, now)
    assert stat(backend, "a").ready == 0


def test_a_capped_tenant_is_served_by_the_first_dequeue_after_its_ack(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    enqueue(backend, new_jobs("b", range(3, 20)))
    set_tenant(backend, "a", max_running=1)
    first = take_one(backend)
    assert first.tenant == "a"
    assert [lease.tenant for lease in take(backend, limit=5)] == ["b"] * 5
    ack(backend, first, 1.0)
    assert take_one(backend, 1.0).tenant == "a"
    assert take_one(backend, 1.0).tenant == "b"


def test_a_tenant_alone_at_its_cap_gets_nothing_more(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(5)))
    set_tenant(backend, "a", max_running=2)
    assert len(take(backend, limit=5)) == 2
    assert take(backend) == []
    assert (stat(backend, "a").running, stat(backend, "a").ready) == (2, 3)


def test_queue_default_cap_applies_to_new_tenants(backend: Backend) -> None:
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue=Q, max_running=2), now=0.0))
    assert backend.get_queue(GetQueueParams(queue=Q)) == QueueSettings(
        queue=Q, weight=1.0, max_running=2
    )
    enqueue(backend, new_jobs("new", range(5)))
    assert stat(backend, "new").max_running == 2
    assert len(take(backend, limit=5)) == 2


def test_raising_a_cap_makes_a_capped_tenant_eligible_again(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(5)))
    set_tenant(backend, "a", max_running=1)
    assert len(take(backend, limit=5)) == 1
    assert set_tenant(backend, "a", max_running=3).max_running == 3
    assert len(take(backend, limit=5)) == 2
    assert set_tenant(backend, "a", max_running=None).max_running is None  # back to the default
    assert len(take(backend, limit=5)) == 2


def test_raising_the_queue_default_releases_tenants_without_their_own_cap(
    backend: Backend,
) -> None:
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue=Q, max_running=1), now=0.0))
    enqueue(backend, new_jobs("a", range(5)))
    enqueue(backend, new_jobs("b", range(5, 10)))
    set_tenant(backend, "b", max_running=1)
    assert sorted(lease.tenant for lease in take(backend, limit=5)) == ["a", "b"]
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue=Q, max_running=3), now=0.0))
    assert [lease.tenant for lease in take(backend, limit=5)] == ["a", "a"]
    assert stat(backend, "b").max_running == 1


def test_settings_are_per_queue(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    enqueue(backend, new_jobs("a", range(3, 6), queue="other"))
    set_tenant(backend, "a", max_running=1)
    assert len(take(backend, limit=3)) == 1
    assert len(take(backend, limit=3, queues=("other",))) == 3
    assert stat(backend, "a", "other").max_running is None


def test_set_tenant_keeps_what_it_is_not_told_to_change(backend: Backend) -> None:
    set_tenant(backend, "a", weight=2.5, max_running=4)
    assert set_tenant(backend, "a", weight=5).max_running == 4
    row = set_tenant(backend, "a", max_running=None)
    assert (row.weight, row.max_running) == (5.0, None)


def test_an_unknown_queue_has_the_default_settings(backend: Backend) -> None:
    assert backend.get_queue(GetQueueParams(queue="never-seen")) == QueueSettings(
        queue="never-seen"
    )
