"""Learned costs on PostgreSQL (functions/costs.sql): a call folds its samples per (queue, name)
in memory, in token order, and writes each row once; a row another transaction holds is
neither waited for by an ack nor by a dispatch: the ack drops that call's samples of it."""

from __future__ import annotations

import dataclasses
import threading

import psycopg

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    JobCost,
    JobCostsParams,
)
from fairq.job import Lease, NewJob
from fairq.policy import cost, fairness

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .helpers import Q, new_job


def named(n: int, name: str) -> NewJob:
    return dataclasses.replace(new_job(n, f"t{n}"), name=name)


def take(pg: DisposableBackend, now: float, limit: int) -> list[Lease]:
    params = DequeueParams(queues=[Q], worker_id="w", now=now, limit=limit)
    return sorted(pg.dequeue(params).leases, key=lambda lease: lease.job_id)


def costs(pg: DisposableBackend) -> list[tuple[str, int, float]]:
    return [(c.name, c.runs, c.estimate) for c in pg.job_costs(JobCostsParams())]


def test_one_call_folds_its_samples_in_token_order(pg: DisposableBackend) -> None:
    """Five runs of "a" and one of "b" end in one call, acked in an order unlike their starts:
    the estimates are the policy's fold of the same samples in the order acked, to the bit
    (the fourth, once three are in, bounded to 4x the mean)."""
    names = ["a", "a", "b", "a", "a", "a"]
    pg.enqueue(EnqueueParams(jobs=[named(n, name) for n, name in enumerate(names)], now=0.0))
    starts = [0.9, 0.7, 0.5, 0.8, 0.0, 0.6]
    leases = [take(pg, at, 1)[0] for at in starts]
    order = [1, 2, 0, 3, 4, 5]  # "a" runs 0.3, 0.1, 0.2, 1.0, 0.4 s in that order
    tokens = [leases[i].token for i in order]
    assert pg.ack_many(AckManyParams(tokens=tokens, now=1.0)).acked == tokens
    runs, mean = 0, 0.0
    for i in order:
        if names[i] == "a":
            runs, mean = cost.learn(runs, mean, fairness.run_charge(starts[i], 1.0))
    assert mean < 0.4  # the 1 s run counted as 4x the mean of the first three
    assert costs(pg) == [("a", 5, mean), ("b", 1, fairness.run_charge(0.5, 1.0))]


def test_a_learned_cost_another_transaction_holds_is_not_waited_for(
    pg: DisposableBackend,
) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(n, f"t{n}") for n in range(5)], now=0.0))
    (first,) = take(pg, 0.0, 1)
    pg.ack_many(AckManyParams(tokens=[first.token], now=0.5))
    assert costs(pg) == [("task", 1, 0.5)]
    release = threading.Event()
    locked = threading.Event()
    done = threading.Event()

    def hold() -> None:
        with psycopg.connect(server_url(), **CALLER_CLOCK) as conn, conn.transaction():
            conn.execute(f'SELECT 1 FROM "{pg.schema}".job_costs FOR UPDATE')
            locked.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(60)
        results: list[object] = []

        def work() -> None:
            # the dispatch reads the committed estimate; the acks drop their samples
            leases = take(pg, 1.0, 2)
            results.append([lease.cost for lease in leases])
            both = pg.ack_and_dequeue(
                AckAndDequeueParams(
                    acks=AckManyParams(tokens=[leases[0].token], now=2.0),
                    dequeue=DequeueParams(queues=[Q], worker_id="w", now=2.0),
                )
            )
            results.append([lease.cost for lease in both.dequeue.leases])
            pg.fail(FailParams(token=leases[1].token, now=3.0, error="x", retry_at=None))
            done.set()

        worker = threading.Thread(target=work)
        worker.start()
        finished = done.wait(60)  # an event, not a sleep: set as soon as the calls return
        assert finished, "an ack, a fail or a dispatch waited for the held learned cost"
        assert results == [[0.5, 0.5], [0.5]]
    finally:
        release.set()
        holder.join()
    worker.join()
    assert pg.job_costs(JobCostsParams()) == [JobCost(queue=Q, name="task", runs=1, estimate=0.5)]
    # let go: the next ack's sample is folded
    (lease,) = take(pg, 4.0, 1)
    pg.ack_many(AckManyParams(tokens=[lease.token], now=4.5))
    assert costs(pg) == [("task", *cost.learn(1, 0.5, 0.5))]


def test_learn_cost_false_travels_through_the_inbox(pg: DisposableBackend) -> None:
    """A job enqueued in a caller's transaction waits in the inbox; taken in, it keeps its
    declared cost though its name has learned one."""
    pg.enqueue(EnqueueParams(jobs=[new_job(0, "a")], now=0.0))
    (first,) = take(pg, 0.0, 1)
    pg.ack_many(AckManyParams(tokens=[first.token], now=0.25))
    fixed = dataclasses.replace(new_job(1, "b"), cost=3.0, learn_cost=False)
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        pg.enqueue_in(conn, EnqueueParams(jobs=[fixed, new_job(2, "c")], now=1.0))
    assert sorted((lease.job_id, lease.cost) for lease in take(pg, 2.0, 2)) == [
        ("j1", 3.0),
        ("j2", 0.25),
    ]
