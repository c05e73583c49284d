"""A queue's cap on leased jobs on PostgreSQL: the count it keeps (queues.in_flight) stays the
number of running jobs through every way a lease ends, also with many workers at once, and an
uncapped queue's acks never write its row (the rules: tests/conformance/test_in_flight.py)."""

from __future__ import annotations

import threading
from dataclasses import replace

import psycopg

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    MaintainParams,
    QueueSettings,
    ReleaseParams,
    SetQueueParams,
)
from fairq.job import Lease

from ._store import DisposableBackend, server_url
from .helpers import Q, new_job

CAP = 3
WORKERS = 6
JOBS = 120


def cap(pg: DisposableBackend, max_in_flight: int | None, now: float = 0.0) -> None:
    settings = QueueSettings(queue=Q, max_in_flight=max_in_flight)
    pg.set_queue(SetQueueParams(settings=settings, now=now))


def take(pg: DisposableBackend, now: float, limit: int = 5) -> list[Lease]:
    params = DequeueParams(queues=[Q], worker_id="w", now=now, limit=limit)
    return list(pg.dequeue(params).leases)


def queue_row(pg: DisposableBackend) -> tuple[int, int]:
    """The queue's kept count and the running jobs it should equal."""
    with psycopg.connect(server_url()) as conn:
        row = conn.execute(
            f'SELECT q.in_flight, (SELECT count(*) FROM "{pg.schema}".jobs j '
            f"WHERE j.queue = q.name AND j.state = 'running') "
            f'FROM "{pg.schema}".queues q WHERE q.name = %s',
            (Q,),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def row_version(pg: DisposableBackend) -> str:
    with psycopg.connect(server_url()) as conn:
        row = conn.execute(
            f'SELECT xmin::text FROM "{pg.schema}".queues WHERE name = %s', (Q,)
        ).fetchone()
    assert row is not None
    return str(row[0])


def test_the_count_is_the_running_jobs_after_every_way_a_lease_ends(
    pg: DisposableBackend,
) -> None:
    cap(pg, CAP)
    pg.enqueue(
        EnqueueParams(jobs=[new_job(n, f"t{n % 4}", lease=10.0) for n in range(20)], now=0.0)
    )
    held = take(pg, 1.0)
    assert queue_row(pg) == (CAP, CAP)
    pg.ack_many(AckManyParams(tokens=[held[0].token], now=2.0))
    pg.fail(FailParams(token=held[1].token, now=2.0, error="x", retry_at=2.0))
    pg.release(ReleaseParams(token=held[2].token, now=2.0))
    assert queue_row(pg) == (0, 0)
    held = take(pg, 3.0)
    both = AckAndDequeueParams(
        acks=AckManyParams(tokens=[held[0].token], now=4.0),
        dequeue=DequeueParams(queues=[Q], worker_id="w", now=4.0, limit=5),
    )
    assert len(pg.ack_and_dequeue(both).dequeue.leases) == 1
    assert queue_row(pg) == (CAP, CAP)
    # every lease expires: maintenance ends them; a dequeue's own maintenance does too
    assert len(pg.maintain(MaintainParams(now=20.0, queues=[Q])).expired) == CAP
    assert queue_row(pg) == (0, 0)
    assert len(take(pg, 21.0)) == CAP
    expired = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=40.0, limit=5))
    assert (len(expired.expired), len(expired.leases)) == (CAP, CAP)
    assert queue_row(pg) == (CAP, CAP)
    cap(pg, None, now=41.0)
    assert queue_row(pg) == (0, CAP)  # not kept while uncapped …
    assert len(take(pg, 41.0, limit=2)) == 2
    cap(pg, 8, now=42.0)
    assert queue_row(pg) == (5, 5)  # … and counted again from the jobs when capped


def test_an_uncapped_queues_acks_leave_its_row_alone(pg: DisposableBackend) -> None:
    """Acks of one queue run side by side under its shared lock: a write to its row in each
    would make them wait for one another. Only a capped queue's row is written."""
    pg.enqueue(EnqueueParams(jobs=[new_job(n, f"t{n}") for n in range(4)], now=0.0))
    held = take(pg, 1.0)
    before = row_version(pg)
    pg.ack_many(AckManyParams(tokens=[held[0].token], now=2.0))
    pg.fail(FailParams(token=held[1].token, now=2.0, error="x", retry_at=None))
    pg.release(ReleaseParams(token=held[2].token, now=2.0))
    assert row_version(pg) == before
    cap(pg, CAP, now=3.0)
    before = row_version(pg)
    pg.ack_many(AckManyParams(tokens=[held[3].token], now=3.0))
    assert row_version(pg) != before


def test_workers_at_once_never_hold_more_than_the_cap(pg: DisposableBackend) -> None:
    """Dequeues, acks, failures, releases and ack-and-dequeues from many threads: the jobs
    held never exceed the cap, and the count ends equal to the running jobs (none)."""
    cap(pg, CAP)
    jobs = [replace(new_job(n, f"t{n % 7}"), max_attempts=10_000) for n in range(JOBS)]
    pg.enqueue(EnqueueParams(jobs=jobs, now=0.0))  # failed again and again, never dead
    guard = threading.Lock()
    held: set[str] = set()
    most = [0]
    done = [0]
    errors: list[BaseException] = []

    def hold(leases: list[Lease]) -> None:
        with guard:  # after the dequeue returned: never more than the store has out
            held.update(lease.job_id for lease in leases)
            most[0] = max(most[0], len(held))

    def drop(lease: Lease, succeeded: bool) -> None:
        with guard:  # before the lease ends: never more than the store has out
            held.discard(lease.job_id)
            done[0] += succeeded

    def work(worker: int) -> None:
        try:
            n = 0
            while True:
                with guard:
                    if done[0] >= JOBS:
                        return
                leases = take(pg, 1.0, limit=2)
                hold(leases)
                for lease in leases:
                    n += 1
                    if n % 5 == 0:
                        drop(lease, False)
                        pg.release(ReleaseParams(token=lease.token, now=1.0))
                    elif n % 7 == 0:
                        drop(lease, False)
                        pg.fail(FailParams(token=lease.token, now=1.0, error="x", retry_at=1.0))
                    elif n % 3 == 0:
                        drop(lease, True)
                        both = AckAndDequeueParams(
                            acks=AckManyParams(tokens=[lease.token], now=1.0),
                            dequeue=DequeueParams(
                                queues=[Q], worker_id=f"w{worker}", now=1.0, limit=1
                            ),
                        )
                        more = list(pg.ack_and_dequeue(both).dequeue.leases)
                        hold(more)
                        for extra in more:
                            drop(extra, True)
                            pg.ack_many(AckManyParams(tokens=[extra.token], now=1.0))
                    else:
                        drop(lease, True)
                        pg.ack_many(AckManyParams(tokens=[lease.token], now=1.0))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert 1 <= most[0] <= CAP
    assert done[0] == JOBS
    assert queue_row(pg) == (0, 0)
