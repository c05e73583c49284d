"""A batch dequeue of ``limit`` jobs gives exactly what ``limit`` single dequeues would."""

from __future__ import annotations

from collections.abc import Callable

from fairq.contract import Backend, QueueSettings, SetQueueParams

from .helpers import Q, enqueue, new_job, new_jobs, set_tenant, take


def busy_store(backend: Backend) -> Backend:
    """Several tenants with weights, a cap, priorities, a delayed job, and two queues."""
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue="other", weight=2.0), now=0.0))
    enqueue(backend, new_jobs("a", range(10)))
    enqueue(backend, new_jobs("b", range(10, 20), cost=3.0))
    enqueue(backend, [new_job(20 + n, "c", priority=n % 3) for n in range(10)])
    enqueue(backend, new_jobs("d", range(30, 40), queue="other"))
    enqueue(backend, [new_job(40, "a", run_at=1.0)])
    set_tenant(backend, "b", weight=2.0)
    set_tenant(backend, "c", max_running=2)
    return backend


def test_batch_dequeue_equals_single_dequeues(make_backend: Callable[[], Backend]) -> None:
    batched, single = busy_store(make_backend()), busy_store(make_backend())
    for now, limit in [(0.0, 7), (0.5, 1), (1.0, 12), (2.0, 50)]:
        queues = (Q, "other") if now else (Q,)
        expected = [lease for _ in range(limit) for lease in take(single, now, 1, queues)]
        assert take(batched, now, limit, queues) == expected


def test_queues_are_tried_in_the_order_given(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    enqueue(backend, new_jobs("a", range(2, 4), queue="other"))
    assert [lease.queue for lease in take(backend, 0.0, 3, ("other", Q))] == [
        "other",
        "other",
        "default",
    ]
