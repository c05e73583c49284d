"""The demo's figures, computed from job records alone (pure: no clock, no store).

* **wait** of a job = ``started_at - enqueued_at``: how long it sat in the queue.
* **jobs/s** = jobs run / (last finish - first start): the workers' throughput.
* **Jain's fairness index** ``J = (sum x)^2 / (n * sum x^2)`` over the *rest of the flood*:
  from the moment every tenant has arrived (the last tenant's first enqueue) to the greedy
  tenant's last start, seconds to minutes rather than the few milliseconds in which every
  tenant has jobs waiting under a fair scheduler. ``x_t`` is the worker-seconds tenant ``t``
  got in that window (its jobs' run time inside it) divided by its max-min fair share of the
  worker-seconds all tenants got there: a small tenant that asked for less than an equal share
  is owed all it asked for (its jobs' run time), and the greedy one the rest. A fair scheduler
  serves the small tenants in full during the flood, so ``J`` is near 1; FIFO serves them only
  after it, so they get 0 of what they are owed there and ``J`` falls to ``1/n``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from fairq.policy.metrics import Waits, jain_index, max_min_shares


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
    """Jain's index over the rest of the flood (``None`` if the flood ended before every tenant
    arrived), with each tenant's worker-seconds there and its max-min fair share of them."""

    index: float | None
    window: tuple[float, float] | None
    got: dict[str, float]
    owed: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class ModeFigures:
    tenants: dict[str, Waits]
    small: Waits  # all small tenants' jobs pooled
    jobs_per_second: float
    elapsed: float
    fairness: Fairness


def waits_of(records: Sequence[JobRecord]) -> Waits:
    return Waits.of([r.wait for r in records])


def fairness_of(records: Sequence[JobRecord], tenants: Sequence[str], flood: str) -> Fairness:
    """Jain's index of each tenant's worker-seconds over its max-min fair share, from the last
    tenant's arrival to the ``flood`` tenant's last start (see the module's docstring)."""
    by_tenant = _group(records)
    none = Fairness(index=None, window=None, got={}, owed={})
    if any(t not in by_tenant for t in tenants):
        return none
    begin = max(min(r.enqueued_at for r in by_tenant[t]) for t in tenants)
    end = max(r.started_at for r in by_tenant[flood])
    if end <= begin:
        return none
    got = {t: sum(_overlap(r, begin, end) for r in by_tenant[t]) for t in tenants}
    asked = {t: sum(_asked(r, begin, end) for r in by_tenant[t]) for t in tenants}
    shares = max_min_shares(sum(got.values()), asked)
    owed = {t: shares[t] for t in tenants}
    ratios = [got[t] / owed[t] if owed[t] > 0 else 1.0 for t in tenants]
    return Fairness(index=jain_index(ratios), window=(begin, end), got=got, owed=owed)


def _asked(record: JobRecord, begin: float, end: float) -> float:
    """The run time a job still needed after ``begin``, if it was enqueued before ``end``."""
    if record.enqueued_at >= end or record.finished_at <= begin:
        return 0.0
    return record.finished_at - max(record.started_at, begin)


def _overlap(record: JobRecord, begin: float, end: float) -> float:
    return max(0.0, min(record.finished_at, end) - max(record.started_at, begin))


def mode_figures(
    records: Sequence[JobRecord], tenants: Sequence[str], small: Sequence[str], flood: str
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
        fairness=fairness_of(records, tenants, flood),
    )


def _group(records: Sequence[JobRecord]) -> dict[str, list[JobRecord]]:
    grouped: dict[str, list[JobRecord]] = defaultdict(list)
    for record in records:
        grouped[record.customer].append(record)
    return grouped
