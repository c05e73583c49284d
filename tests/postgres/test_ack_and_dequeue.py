"""ack_and_dequeue on PostgreSQL: one statement and one transaction for the acks and the
dequeue (schema 9), with maintenance when it is due, and all-or-nothing when it fails.

What it returns is held to ack_many-then-dequeue by tests/conformance (test_batch.py and the
state machine); these tests check what only PostgreSQL can show: the transaction."""

from __future__ import annotations

import threading
from collections import Counter

import psycopg
import pytest

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    QueueSettings,
    SetQueueParams,
    StatsParams,
)
from fairq.job import JobState, Lease

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .helpers import Q, new_job


def take(
    pg: DisposableBackend, now: float, limit: int, queues: tuple[str, ...] = (Q,)
) -> list[Lease]:
    return pg.dequeue(DequeueParams(queues=queues, worker_id="w", now=now, limit=limit)).leases


def xmins(pg: DisposableBackend, table: str, ids: list[str]) -> set[int]:
    """The transactions that wrote these rows last (xmin)."""
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        rows = conn.execute(
            f'SELECT xmin::text::bigint FROM "{pg.schema}".{table} WHERE id = ANY(%s)', (ids,)
        ).fetchall()
    assert len(rows) == len(ids)
    return {row[0] for row in rows}


@pytest.mark.parametrize("now", [1.0, 6.0], ids=["fast", "maintenance due"])
def test_the_acks_and_the_dequeue_commit_in_one_transaction(
    pg: DisposableBackend, now: float
) -> None:
    """The jobs acked and the jobs handed out were written by one transaction, both when
    nothing is due (one statement) and when a scheduled job is due (the slow path)."""
    pg.enqueue(EnqueueParams(jobs=[new_job(n, f"t{n % 3}") for n in range(8)], now=0.0))
    pg.enqueue(EnqueueParams(jobs=[new_job(9, "t9", run_at=5.0)], now=0.0))
    done = take(pg, 0.5, 3)
    acks = AckManyParams(tokens=[lease.token for lease in done], now=now)
    params = DequeueParams(queues=(Q,), worker_id="w", now=now, limit=4)
    both = pg.ack_and_dequeue(AckAndDequeueParams(acks=acks, dequeue=params))
    result, leases = both.acks, list(both.dequeue.leases)
    assert list(result.acked) == acks.tokens
    assert len(leases) == 4 and ("j9" in {lease.job_id for lease in leases}) == (now > 5.0)
    acked = xmins(pg, "succeeded_jobs", [lease.job_id for lease in done])
    started = xmins(pg, "jobs", [lease.job_id for lease in leases])
    assert len(acked) == 1 and acked == started


def test_a_failing_dispatch_undoes_the_acks_of_its_call(pg: DisposableBackend) -> None:
    """All or nothing: when the dequeue part raises, the acks before it are not stored."""
    pg.enqueue(EnqueueParams(jobs=[new_job(n, "a") for n in range(4)], now=0.0))
    done = take(pg, 0.5, 2)
    with psycopg.connect(
        server_url(), autocommit=True, **CALLER_CLOCK
    ) as conn:  # a head that is not ready
        conn.execute(
            f'UPDATE "{pg.schema}".tenants SET head_seq = '
            f"(SELECT seq FROM \"{pg.schema}\".jobs WHERE id = 'j0')"
        )
    acks = AckManyParams(tokens=[lease.token for lease in done], now=1.0)
    with pytest.raises(psycopg.errors.RaiseException, match=r"head job .* is not ready"):
        pg.ack_and_dequeue(
            AckAndDequeueParams(
                acks=acks, dequeue=DequeueParams(queues=(Q,), worker_id="w", now=1.0, limit=2)
            )
        )
    (stats,) = pg.stats(StatsParams(queue=Q))
    assert (stats.running, stats.succeeded) == (2, 0)
    assert {job.state for job in pg.get_jobs(GetJobsParams(ids=["j0", "j1"]))} == {JobState.RUNNING}


def test_workers_acking_across_queues_never_share_a_job_or_break_a_cap(
    pg: DisposableBackend,
) -> None:
    """Workers dequeue from two queues in either order and ack jobs of both in each call (the
    exclusive and shared queue locks of one call): no deadlock, no lease lost, each job handed
    out once, and every job succeeds (a slot taken over a cap would raise in the store)."""
    queues = ("q1", "q2")
    for queue in queues:
        pg.set_queue(SetQueueParams(settings=QueueSettings(queue=queue, max_running=2), now=0.0))
    jobs = [new_job(n, f"t{n % 3}", queue=queues[n % 2]) for n in range(240)]
    pg.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    taken: Counter[str] = Counter()
    errors: list[BaseException] = []
    guard = threading.Lock()

    def work(worker: int) -> None:
        order = queues if worker % 2 else queues[::-1]
        held: list[str] = []
        try:
            while True:
                params = DequeueParams(queues=order, worker_id=f"w{worker}", now=1.0, limit=3)
                both = pg.ack_and_dequeue(
                    AckAndDequeueParams(acks=AckManyParams(tokens=held, now=1.0), dequeue=params)
                )
                result, leases = both.acks, list(both.dequeue.leases)
                assert list(result.lost) == []
                with guard:
                    taken.update(lease.job_id for lease in leases)
                if not leases and sum(taken.values()) == len(jobs):
                    return
                held = [lease.token for lease in leases]
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert taken == Counter(job.id for job in jobs)  # each exactly once
    for row in pg.stats(StatsParams()):
        assert (row.ready, row.running, row.succeeded) == (0, 0, 40)
