"""Per-tenant figures in the store (fairq/figures.py): every dispatch's wait and every run's
time and outcome land in the right bucket of the right slot, batches count each job, and
slots slide out of the window on the suite's virtual clock."""

from __future__ import annotations

import math

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    Backend,
    DequeueParams,
    FailParams,
    FiguresParams,
    MaintainParams,
    TenantFigures,
)
from fairq.policy.histogram import BOUNDS, BUCKETS, bucket_of, counts_of, histogram_of

from .helpers import Q, ack, enqueue, new_job, new_jobs, take, take_one

ODD = "ü:{x} y"  # a tenant id a key or row must carry exactly


def figures(backend: Backend, now: float, **filters: str) -> dict[tuple[str, str], TenantFigures]:
    rows = backend.figures(FiguresParams(now=now, **filters))
    assert [(r.queue, r.tenant) for r in rows] == sorted((r.queue, r.tenant) for r in rows)
    return {(r.queue, r.tenant): r for r in rows}


def only(backend: Backend, now: float, tenant: str = "a") -> TenantFigures:
    found = figures(backend, now, tenant=tenant)
    assert list(found) == [(Q, tenant)], found
    return found[(Q, tenant)]


def test_a_fresh_store_has_no_figures(backend: Backend) -> None:
    assert backend.figures(FiguresParams(now=0.0)) == []
    enqueue(backend, [new_job(0, "a")])  # enqueued, never started: nothing recorded
    assert backend.figures(FiguresParams(now=1.0)) == []


def test_each_dispatch_records_its_wait_in_its_bucket(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(4), lease=1000.0))
    for now in (0.0005, 0.004, 1.5, 40.0):  # buckets: <= 1 ms, (2, 4] ms, (1.024, 2.048] s, …
        take_one(backend, now)
    row = only(backend, 41.0)
    assert row.wait == counts_of({0: 1, 2: 1, 11: 1, 16: 1})  # 40 s: (32.768, 65.536]
    assert (row.started, row.run, row.outcomes) == (4, (0,) * BUCKETS, {})
    assert len(row.wait) == BUCKETS


def test_each_end_records_its_run_time_and_outcome(backend: Backend) -> None:
    enqueue(backend, new_jobs(ODD, range(3), lease=10.0))
    done, failed, _lost = take(backend, 1.0, limit=3)
    ack(backend, done, 1.5)  # ran 0.5 s: (0.256, 0.512]
    backend.fail(FailParams(token=failed.token, now=4.0, error="x", retry_at=None))  # 3 s
    backend.maintain(MaintainParams(now=11.0))  # lost's lease expired: its run time unknown
    row = only(backend, 12.0, ODD)
    assert row.run == counts_of({9: 1, 12: 1})
    assert row.outcomes == {"succeeded": 1, "failed": 1, "expired": 1}
    assert row.ended == 3


def test_a_retry_waits_from_when_it_became_due(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a")])
    backend.fail(FailParams(token=take_one(backend, 0.0).token, now=2.0, error="x", retry_at=4.0))
    take_one(backend, 5.0)  # ready since 4.0: waited 1 s, (0.512, 1.024]
    assert only(backend, 6.0).wait == counts_of({0: 1, 10: 1})


def test_batches_count_every_job_per_tenant(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(0, 3)) + new_jobs("b", range(10, 12)), now=0.0)
    leases = take(backend, 0.003, limit=5)  # every job waited 3 ms: (2, 4] ms
    assert backend.ack_many(AckManyParams(tokens=[lease.token for lease in leases], now=0.5)).acked
    both = backend.ack_and_dequeue(
        AckAndDequeueParams(
            acks=AckManyParams(tokens=[], now=0.6),
            dequeue=DequeueParams(queues=[Q], worker_id="w", now=0.6),
        )
    )
    assert both.dequeue.leases == []
    found = figures(backend, 1.0)
    a, b = found[(Q, "a")], found[(Q, "b")]
    assert (a.wait, b.wait) == (counts_of({2: 3}), counts_of({2: 2}))
    assert (a.outcomes, b.outcomes) == ({"succeeded": 3}, {"succeeded": 2})
    assert a.run == counts_of({9: 3})  # 0.497 s: (0.256, 0.512]


def test_ack_and_dequeue_records_the_acks_and_the_new_dispatches(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    first = take_one(backend, 0.0)
    backend.ack_and_dequeue(
        AckAndDequeueParams(
            acks=AckManyParams(tokens=[first.token], now=2.0),
            dequeue=DequeueParams(queues=[Q], worker_id="w", now=2.0, limit=2),
        )
    )
    row = only(backend, 3.0)
    assert row.wait == counts_of({0: 1, 11: 2})  # 0 s, then 2 s twice: (1.024, 2.048]
    assert (row.run, row.outcomes) == (counts_of({11: 1}), {"succeeded": 1})


def test_slots_slide_out_of_the_window(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2), lease=1e4) + new_jobs("b", range(10, 11), lease=1e4))
    take_one(backend, 10.0)  # slot 0 (a)
    enqueue(backend, [new_job(20, "c", lease=1e4)], now=300.0)
    assert len(take(backend, 310.0, limit=2)) == 2  # slot 5 (a fair pick: b, c)
    early = figures(backend, 590.0)  # slots 0..9: everything, since slot 0 began
    assert {t for _, t in early} == {"a", "b", "c"}
    assert {row.window for row in early.values()} == {590.0}
    later = figures(backend, 600.0)  # slots 1..10: the dispatch at 10 s is gone
    assert {t for _, t in later} == {"b", "c"}
    assert {row.window for row in later.values()} == {300.0}  # from slot 5's start
    take_one(backend, 700.0)  # a write after the window moved on
    assert {t for _, t in figures(backend, 700.0)} == {"a", "b", "c"}
    assert figures(backend, 1000.0)[(Q, "a")].started == 1  # only the one at 700
    assert backend.figures(FiguresParams(now=1400.0)) == []


def test_figures_are_read_per_queue_and_per_tenant(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a"), new_job(1, "b"), new_job(2, "a", queue="other")])
    take(backend, 1.0, limit=2)
    take(backend, 30.0, queues=["other"])
    assert list(figures(backend, 31.0)) == [(Q, "a"), (Q, "b"), ("other", "a")]
    assert list(figures(backend, 31.0, queue="other")) == [("other", "a")]
    assert list(figures(backend, 31.0, tenant="a")) == [(Q, "a"), ("other", "a")]
    (row,) = figures(backend, 31.0, queue=Q, tenant="b").values()
    assert (row.started, row.window) == (1, 31.0)
    assert figures(backend, 31.0, tenant="nobody") == {}


def test_every_store_buckets_a_bound_and_the_next_double_alike(backend: Backend) -> None:
    """Each store computes buckets on its own (Lua, SQL): at every bound, the bound is its own
    bucket's and the next double above it the next bucket's, as in fairq.policy.histogram."""
    waits = [w for bound in BOUNDS for w in (bound, math.nextafter(bound, math.inf))]
    enqueue(backend, [new_job(i, f"t{i}", lease=1e6) for i in range(len(waits))])
    for i, wait in enumerate(waits):  # each job ready at 0, one tenant each, taken in turn
        assert take_one(backend, wait).tenant == f"t{i}"
        assert only(backend, wait, f"t{i}").wait == histogram_of([wait]), wait
    assert [bucket_of(w) for w in waits[:4]] == [0, 1, 1, 2]
