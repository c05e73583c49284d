"""The per-tenant figures every store keeps (fairq/policy/histogram.py): how the contract asks
for them and answers, and the steps every store shares to record and read them.

A store keeps sparse counts, one per (queue, tenant, slot, kind, bucket): kind ``WAIT`` and
``RUN`` count durations in a histogram bucket, kind ``OUTCOME`` counts ends by outcome (the
bucket is the outcome's index in ``histogram.OUTCOMES``) but for succeeded runs: every run
that ended with a known time (acked, failed, or cancelled by its worker) is in ``RUN``, so the
succeeded ones are the runs less the failed and cancelled ones, and an ack writes one count
where it would write two. ``Tally``
gathers the counts of one call (a batch dequeue, an ack of many) so a store writes them in one
statement or command, and ``figures_from`` turns what a store read back into the contract's
rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from fairq.policy import histogram
from fairq.policy.histogram import Counts

WAIT, RUN, OUTCOME = "w", "r", "o"
W = TypeVar("W")
OUTCOME_INDEX = {name: i for i, name in enumerate(histogram.OUTCOMES)}


@dataclass(frozen=True, kw_only=True)
class FiguresParams:
    """Read the recent figures at ``now`` (``histogram.WINDOW``), of one queue and/or one
    tenant, or of all."""

    now: float
    queue: str | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class TenantFigures:
    """One (queue, tenant)'s recent figures: dispatches by wait, runs by run time (both
    ``histogram.BUCKETS`` counts, ``histogram.BOUNDS``), and runs ended by outcome.

    ``window`` is the span they cover, in seconds: from the start of the queue's oldest slot
    still in the window that has figures, to ``now`` (at most ``histogram.WINDOW``). A rate
    is a count over it (``histogram.per_minute``).
    """

    queue: str
    tenant: str
    wait: Counts
    run: Counts
    outcomes: Mapping[str, int] = field(default_factory=dict)  # histogram.OUTCOMES -> count
    window: float

    @property
    def started(self) -> int:
        """Dispatches in the window."""
        return histogram.total(self.wait)

    @property
    def ended(self) -> int:
        return sum(self.outcomes.values())


#: One sparse count as a store keeps it: (queue, tenant, slot, kind, bucket) -> count.
Key = tuple[str, str, int, str, int]


class Tally(Generic[W]):
    """The counts one store call adds, aggregated per (who, kind, bucket) — ``who`` being
    how the store names a (queue, tenant) — so a store writes them in one statement or
    command at the end of the call, in key order (a fixed lock order)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[W, str, int]] = Counter()

    def waited(self, who: W, seconds: float) -> None:
        self.counts[(who, WAIT, histogram.bucket_of(seconds))] += 1

    def ended(self, who: W, outcome: str, ran: float | None) -> None:
        """A run ended (``ran``: its run time; None when unknown, as for an expired lease).
        A succeeded run is counted by its run time alone (``succeeded_of``)."""
        if ran is not None:
            self.counts[(who, RUN, histogram.bucket_of(ran))] += 1
        if outcome != histogram.SUCCEEDED:
            self.counts[(who, OUTCOME, OUTCOME_INDEX[outcome])] += 1

    def rows(self) -> list[tuple[W, str, int, int]]:
        """(who, kind, bucket, count), sorted."""
        return [(*key, count) for key, count in sorted(self.counts.items())]

    def __bool__(self) -> bool:
        return bool(self.counts)


def figures_from(counts: Iterable[tuple[Key, int]], params: FiguresParams) -> list[TenantFigures]:
    """The contract's rows from a store's sparse counts: those of slots in the window at
    ``params.now`` and of the queue and tenant asked are kept (older ones may not have been
    pruned yet), summed per (queue, tenant), sorted by queue then tenant.

    The window of each row starts at its queue's oldest slot with counts, so a store reads
    the counts of every tenant of the queues asked, even when one tenant is asked for."""
    first = histogram.first_slot(params.now)
    last = histogram.slot_of(params.now)
    sparse: dict[tuple[str, str], dict[str, Counter[int]]] = {}
    found: dict[str, int] = {}
    for (queue, tenant, slot, kind, bucket), count in counts:
        if not first <= slot <= last or count <= 0:
            continue
        if params.queue is not None and queue != params.queue:
            continue
        found[queue] = min(found.get(queue, slot), slot)
        if params.tenant is not None and tenant != params.tenant:
            continue
        kinds = sparse.setdefault(
            (queue, tenant), {WAIT: Counter(), RUN: Counter(), OUTCOME: Counter()}
        )
        kinds[kind][bucket] += count
    rows = []
    for (queue, tenant), kinds in sorted(sparse.items()):
        start = found[queue]
        outcomes = {histogram.OUTCOMES[i]: n for i, n in sorted(kinds[OUTCOME].items())}
        ended = outcomes.get(histogram.FAILED, 0) + outcomes.get(histogram.CANCELLED, 0)
        succeeded = sum(kinds[RUN].values()) - ended
        if succeeded > 0:
            outcomes = {histogram.SUCCEEDED: succeeded, **outcomes}
        rows.append(
            TenantFigures(
                queue=queue,
                tenant=tenant,
                wait=histogram.counts_of(kinds[WAIT]),
                run=histogram.counts_of(kinds[RUN]),
                outcomes=outcomes,
                window=max(0.0, params.now - start * histogram.SLOT),
            )
        )
    return rows
