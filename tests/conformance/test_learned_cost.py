"""The estimate charged at dispatch is learned from real run times (fairq.policy.cost).

Per (queue, job name): the declared cost until the first run ends, then the mean of the runs
measured (the first 20 equally, later ones decayed), each run bounded to 4x the estimate once
3 are in. Acks and reported failures are samples; an expired lease, a hand-back and a relayed
job's wait in the broker are not. ``learn_cost=False`` keeps the declared cost.
"""

from __future__ import annotations

import pytest

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    Backend,
    DequeueParams,
    FailParams,
    JobCost,
    JobCostsParams,
    MaintainParams,
    ReleaseParams,
)
from fairq.policy import cost, fairness

from .helpers import Q, ack, enqueue, new_job, new_jobs, take_one


def costs(backend: Backend, queue: str | None = None) -> list[JobCost]:
    return backend.job_costs(JobCostsParams(queue=queue))


def run(backend: Backend, now: float, seconds: float) -> float:
    """Take one job at ``now``, ack it ``seconds`` later; the estimate it was charged."""
    lease = take_one(backend, now)
    ack(backend, lease, now + seconds)
    return lease.cost


def test_the_declared_cost_is_charged_until_a_run_ends_then_the_run_time(
    backend: Backend,
) -> None:
    enqueue(backend, new_jobs("a", range(4), cost=2.5))
    assert costs(backend) == []
    assert run(backend, 0.0, 0.25) == 2.5
    assert costs(backend) == [JobCost(queue=Q, name="task", runs=1, estimate=0.25)]
    assert run(backend, 1.0, 0.75) == 0.25
    assert run(backend, 2.0, 1.0) == 0.5  # the mean of the two runs measured
    assert costs(backend)[0].runs == 3


def test_the_mean_of_the_first_runs_then_a_decayed_mean_with_outliers_bounded(
    backend: Backend,
) -> None:
    """The store's estimate after each run is the policy's fold of the same samples, to the
    last bit: 30 runs (past the window), among them an hour-long hang once trusted."""
    seconds = [0.02, 0.04, 0.03] + [0.01 * (1 + k % 5) for k in range(26)] + [3600.0]
    enqueue(backend, new_jobs("a", range(len(seconds) + 1), lease=7200.0))
    runs, mean = 0, 0.0
    now = 0.0
    for length in seconds:
        lease = take_one(backend, now)
        assert lease.cost == (1.0 if runs == 0 else mean)
        started, now = now, now + length
        ack(backend, lease, now)
        runs, mean = cost.learn(runs, mean, fairness.run_charge(started, now))
        assert costs(backend) == [JobCost(queue=Q, name="task", runs=runs, estimate=mean)]
    assert runs == cost.WINDOW
    assert mean < 0.1  # the hang counted as 4x the estimate, not as an hour
    assert take_one(backend, now).cost == mean


def test_estimates_are_kept_per_queue_and_job_name(backend: Backend) -> None:
    enqueue(
        backend,
        [
            new_job(0, "a", name="small"),
            new_job(1, "a", name="big"),
            new_job(2, "a", name="small", queue="other"),
        ],
    )
    small = take_one(backend, 0.0)
    ack(backend, small, 0.1)
    big = take_one(backend, 1.0)
    ack(backend, big, 5.0)
    other = backend.dequeue(DequeueParams(queues=["other"], worker_id="w", now=6.0)).leases[0]
    assert other.cost == 1.0  # the same name in another queue learned nothing yet
    assert [(c.queue, c.name, c.estimate) for c in costs(backend)] == [
        (Q, "big", 4.0),
        (Q, "small", pytest.approx(0.1)),
    ]
    assert [c.name for c in costs(backend, "other")] == []


def test_a_job_declared_with_learn_cost_false_is_always_charged_its_cost(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a"), new_job(1, "a", cost=3.0, learn_cost=False)])
    run(backend, 0.0, 0.5)
    assert run(backend, 1.0, 0.5) == 3.0  # fixed, though its name has an estimate
    assert costs(backend)[0].runs == 2  # its run is measured all the same


def test_a_failure_is_a_sample_an_expiry_and_a_hand_back_are_not(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(4), lease=10.0, max_attempts=5))
    lease = take_one(backend, 0.0)
    backend.fail(FailParams(token=lease.token, now=0.5, error="boom", retry_at=None))
    assert [(c.runs, c.estimate) for c in costs(backend)] == [(1, 0.5)]
    lease = take_one(backend, 1.0)
    backend.release(ReleaseParams(token=lease.token, now=1.2))
    take_one(backend, 2.0)  # never reported: its lease expires at 12
    assert backend.maintain(MaintainParams(now=12.0)).expired
    assert [(c.runs, c.estimate) for c in costs(backend)] == [(1, 0.5)]


def test_an_ack_and_dequeue_charges_the_estimate_its_acks_just_learned(
    backend: Backend,
) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    first = take_one(backend, 0.0)
    result = backend.ack_and_dequeue(
        AckAndDequeueParams(
            acks=AckManyParams(tokens=[first.token], now=0.2),
            dequeue=DequeueParams(queues=[Q], worker_id="w1", now=0.2),
        )
    )
    assert [lease.cost for lease in result.dequeue.leases] == [pytest.approx(0.2)]


def test_instant_runs_are_learned_as_the_minimum_charge(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    run(backend, 5.0, 0.0)
    assert costs(backend)[0].estimate == fairness.run_charge(5.0, 5.0) == 0.001
