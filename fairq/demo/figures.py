"""The demo's figures, computed from job records alone (pure: no clock, no store).

* **wait** of a job = ``started_at - enqueued_at``: how long it sat in the queue.
* **jobs/s** = jobs run / (last finish - first start): the workers' throughput.
* **Jain's fairness index** ``J = (sum x)^2 / (n * sum x^2)`` over ``x_t``, the number of jobs
  each tenant ``t`` started during the *contention window*: from the moment every tenant has
  jobs waiting (the last tenant's first enqueue) to the moment the first tenant has none left
  waiting (the earliest "last job started" of any tenant). While everyone is waiting, a fair
  scheduler starts about as many jobs for each, so ``J`` is near 1; FIFO serves only the greedy
  tenant there, the small ones start 0, and ``J`` falls to ``1/n``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from fairq.policy.metrics import Waits, jain_index


@dataclass(frozen=True, kw_only=True)
class JobRecord:
    """One finished demo job, with the tenant it was really done for."""

    customer: str
    enqueued_at: float
    started_at: float
    finished_at: float

    @property
    def wait(self) -> float:
        return self.started_at - self.enqueued_at


@dataclass(frozen=True, kw_only=True)
class Fairness:
    """Jain's index over starts in the contention window (``None`` if there was no overlap)."""

    index: float | None
    window: tuple[float, float] | None
    starts: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class ModeFigures:
    tenants: dict[str, Waits]
    small: Waits  # all small tenants' jobs pooled
    jobs_per_second: float
    elapsed: float
    fairness: Fairness


def waits_of(records: Sequence[JobRecord]) -> Waits:
    return Waits.of([r.wait for r in records])


def fairness_of(records: Sequence[JobRecord], tenants: Sequence[str]) -> Fairness:
    by_tenant = _group(records)
    if any(t not in by_tenant for t in tenants):
        return Fairness(index=None, window=None, starts={t: 0 for t in tenants})
    start = max(min(r.enqueued_at for r in by_tenant[t]) for t in tenants)
    end = min(max(r.started_at for r in by_tenant[t]) for t in tenants)
    starts = {t: sum(1 for r in by_tenant[t] if start <= r.started_at <= end) for t in tenants}
    if end < start:
        return Fairness(index=None, window=None, starts=starts)
    return Fairness(
        index=jain_index([float(n) for n in starts.values()]), window=(start, end), starts=starts
    )


def mode_figures(
    records: Sequence[JobRecord], tenants: Sequence[str], small: Sequence[str]
) -> ModeFigures:
    by_tenant = _group(records)
    first = min((r.started_at for r in records), default=0.0)
    last = max((r.finished_at for r in records), default=0.0)
    elapsed = max(last - first, 1e-9)
    return ModeFigures(
        tenants={t: waits_of(by_tenant.get(t, [])) for t in tenants},
        small=waits_of([r for r in records if r.customer in set(small)]),
        jobs_per_second=len(records) / elapsed,
        elapsed=elapsed,
        fairness=fairness_of(records, tenants),
    )


def _group(records: Sequence[JobRecord]) -> dict[str, list[JobRecord]]:
    grouped: dict[str, list[JobRecord]] = defaultdict(list)
    for record in records:
        grouped[record.customer].append(record)
    return grouped
