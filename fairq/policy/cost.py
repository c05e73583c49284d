"""Learned job costs: the estimate a tenant is charged when one of its jobs is handed out.

Why it matters: at dispatch a tenant's finish tag grows by ``estimate / w``; the real run time
replaces it only at the run's end. With one job slot nothing else is handed out meanwhile, so
the estimate does not matter. With P slots, up to P jobs are in flight at every dispatch, each
charged its estimate: an estimate 100x the real run time holds a tenant to about one job in
flight per share whatever its weight (1:3:6 came out 40/119/141 at 2 slots), one 100x too
small lets a tenant take every slot before it pays. So the estimate is what the job really
takes, measured, per queue and job name (docs/internals/scheduler.md, "Learned cost").

The rule, in the same expressions in every store (Lua and SQL repeat them in this order, so
the doubles are bit-identical):

* every run that ends with a known run time (an ack, or a failure its worker reported) feeds
  its charge ``max(ended_at - started_at, MIN_CHARGE)`` as one *sample* of its (queue, name);
* the estimate is the mean of the first ``WINDOW`` samples, then an exponentially decayed mean
  that gives each new sample the weight ``1 / WINDOW`` (a memory of about ``WINDOW`` runs, so a
  job that changes is followed within a few dozen runs): ``runs = min(runs + 1, WINDOW)``,
  ``mean = mean + (sample - mean) / runs``. A mean, not a median or a quantile, because what
  the tags must carry is the expected worker time of a job in flight;
* an outlier cannot poison it: once ``TRUSTED`` samples are in, a sample counts as at most
  ``OUTLIER`` times the estimate (a run that hung for an hour moves a 10 ms estimate by
  ``(4 - 1) / 20`` = 15 %, not to three minutes). A run that never reported its end (its lease
  expired: the worker died or hung) is no sample at all; nor is a hand-back, nor a relayed
  job's time in the broker before a worker claimed it;
* the estimate charged at dispatch is the job's declared ``cost`` (1 s unless declared) until
  its (queue, name) has a sample, then the learned mean; a job declared with
  ``learn_cost=False`` is always charged its declared ``cost``.

The real run time still replaces the estimate at the run's end, so fairness stays in
worker-seconds whatever the estimate: learning only makes the charge of the jobs in flight
right, which is what weights at many slots need.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Samples averaged equally before the mean starts to decay (and the decay's weight, 1/WINDOW).
WINDOW = 20
#: Samples needed before the estimate bounds new ones (the first few are taken as they come).
TRUSTED = 3
#: A sample counts as at most this many times the current estimate.
OUTLIER = 4.0


def learn(runs: int, mean: float, sample: float) -> tuple[int, float]:
    """Fold one run's charge into a (queue, name)'s ``(runs, mean)``; returns the new pair.

    A (queue, name) with no sample yet is ``(0, 0.0)``: its first sample becomes the mean."""
    if runs >= TRUSTED:
        sample = min(sample, OUTLIER * mean)
    runs = min(runs + 1, WINDOW)
    return runs, mean + (sample - mean) / runs


def estimate(cost: float, learn_cost: bool, runs: int, mean: float) -> float:
    """What a job is charged when handed out: its declared ``cost`` while its (queue, name) has
    no sample or when it is declared with ``learn_cost=False``; else the learned mean."""
    if not learn_cost or runs == 0:
        return cost
    return mean


@dataclass(frozen=True, kw_only=True)
class JobCost:
    """A (queue, job name)'s learned run time, as ``Backend.job_costs`` reports it."""

    queue: str
    name: str
    runs: int  # samples folded in, up to WINDOW (it stays there)
    estimate: float  # seconds: what its next job is charged (unless declared learn_cost=False)
