"""Weights give their shares at any concurrency, with no cost declared (fairq.policy.cost).

Three backlogged tenants at weights 1:3:6 run on P job slots of a virtual clock; nobody
declares a cost, so each job is first charged the default 1 s and then the learned run time of
its name. Before learned costs, 10 ms jobs came out 40/119/141 at 2 slots and 75/75/150 at 4:
each tenant was held to about one job in flight per share. After a warm-up of 20 runs, the
next 300 starts' worker-seconds must split 1:3:6 — each tenant's share within 3 points of a
tenth, three tenths, six tenths — and, where every job runs equally long, so must the starts,
each within one job of the ideal count (the granularity of the SFQ bound below).

Two readings of the goal, said here so nobody mistakes them for slack. "±3 %" is points of
share: for the mix of lengths (each job drawn from 5 ms to 500 ms) even one slot cannot hold
the lightest tenant's 7.5 s to 3 % of itself, since one 500 ms job is 6.7 % of it (the SFQ bound
is one job per tenant). And for the mix the starts are not 1:3:6: fairness is in
worker-seconds, so a tenant whose draws came out shorter starts more jobs (37/93/170 at one
slot, with the old scheduler as with this one).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import combinations

import pytest

from fairq.contract import Backend, JobCostsParams

from .pool import Start, after_warm_up, run_pool, shares

WEIGHTS = {"t1": 1.0, "t2": 3.0, "t3": 6.0}
IDEAL = {tenant: weight / sum(WEIGHTS.values()) for tenant, weight in WEIGHTS.items()}
WARM_UP = 20  # runs of the job name
COUNTED = 300
PER_TENANT = 360  # enough to keep every tenant backlogged past the counted starts


def lengths_of(kind: str) -> dict[str, list[float]]:
    if kind == "10ms":
        return {t: [0.01] * PER_TENANT for t in WEIGHTS}
    if kind == "2s":
        return {t: [2.0] * PER_TENANT for t in WEIGHTS}
    rng = random.Random(28)  # "mix": each tenant's jobs drawn from 5 ms to 500 ms
    return {t: [round(rng.uniform(0.005, 0.5), 3) for _ in range(PER_TENANT)] for t in WEIGHTS}


@pytest.mark.parametrize("slots", [1, 2, 4, 8, 32])
@pytest.mark.parametrize("jobs", ["10ms", "2s", "mix"])
def test_weights_1_3_6_give_their_shares_at_any_concurrency(
    backend: Backend, jobs: str, slots: int
) -> None:
    record = run_pool(
        backend,
        weights=WEIGHTS,
        lengths=lengths_of(jobs),
        slots=slots,
        starts=WARM_UP + slots + COUNTED,
    )
    counted = after_warm_up(record, WARM_UP)[:COUNTED]
    assert len(counted) == COUNTED
    by_seconds = shares(counted, lambda s: s.length)
    for tenant, ideal in IDEAL.items():
        assert abs(by_seconds[tenant] - ideal) <= 0.03, (tenant, by_seconds)
    if jobs != "mix":  # every job runs equally long: starts split as worker-seconds do
        for tenant, ideal in IDEAL.items():
            count = sum(1 for s in counted if s.tenant == tenant)
            assert abs(count - ideal * COUNTED) <= 1, (tenant, shares(counted, lambda s: 1.0))
        assert all(s.charged == pytest.approx(s.length) for s in counted)  # learned exactly


def test_the_sfq_bound_holds_at_four_slots(backend: Backend) -> None:
    """The multi-server form of the SFQ bound (docs/internals/scheduler.md, "Learned cost").

    Each tenant has a job name of its own, so once a name has run once its estimate is exact.
    From the moment every job charged an inexact estimate has ended, for every two tenants i
    and j (backlogged throughout), with l the length of a job and w the weight:

    * over every run of consecutive dispatches, the work handed out satisfies
      ``|W_i/w_i - W_j/w_j| <= l_i/w_i + l_j/w_j`` (the single-server bound: P slots change
      when jobs are handed out, not in which order);
    * over every interval of time, the work done satisfies
      ``|E_i/w_i - E_j/w_j| <= (P + 1) (l_i/w_i + l_j/w_j)`` (the jobs running at the
      interval's two ends, at most P, add their lengths).
    """
    slots = 4
    weights = {"a": 1.0, "b": 3.0, "c": 6.0}
    length = {"a": 0.03, "b": 0.2, "c": 0.01}
    record = run_pool(
        backend,
        weights=weights,
        lengths={t: [length[t]] * 400 for t in weights},
        names={t: f"job-{t}" for t in weights},
        slots=slots,
        starts=420,
    )
    inexact = [s for s in record if s.charged != pytest.approx(s.length)]
    assert 0 < len(inexact) <= slots  # only the first jobs, charged the default 1 s
    settled = max(s.at + s.length for s in inexact)
    window = [s for s in record if s.at >= settled]
    assert len(window) > 300
    for i, j in combinations(weights, 2):
        bound = length[i] / weights[i] + length[j] / weights[j]
        handed = _dispatch_gap(window, i, j, weights)
        assert handed <= bound + 1e-9, (i, j, handed, bound)
        done = _time_gap(window, i, j, weights)
        assert done <= (slots + 1) * bound + 1e-9, (i, j, done, bound)
    # The estimates the store reports are the lengths.
    costs = {c.name: c.estimate for c in backend.job_costs(JobCostsParams())}
    assert costs == pytest.approx({f"job-{t}": length[t] for t in weights})


def _dispatch_gap(window: Sequence[Start], i: str, j: str, weights: dict[str, float]) -> float:
    """max over runs of dispatches of |W_i/w_i - W_j/w_j|: the spread of its running sum."""
    gap = lowest = highest = 0.0
    for start in window:
        if start.tenant in (i, j):
            sign = 1.0 if start.tenant == i else -1.0
            gap += sign * start.length / weights[start.tenant]
            lowest, highest = min(lowest, gap), max(highest, gap)
    return highest - lowest


def _time_gap(window: Sequence[Start], i: str, j: str, weights: dict[str, float]) -> float:
    """max over intervals of time of |E_i/w_i - E_j/w_j|, E the work done in the interval."""
    times = sorted({s.at for s in window} | {s.at + s.length for s in window})

    def done(tenant: str, at: float) -> float:
        return (
            sum(min(max(at - s.at, 0.0), s.length) for s in window if s.tenant == tenant)
            / weights[tenant]
        )

    series = [done(i, t) - done(j, t) for t in times]
    return max(series) - min(series)
