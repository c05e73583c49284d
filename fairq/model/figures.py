"""The reference model's figures (fairq/figures.py): sparse counts per (queue, tenant, slot,
kind, bucket), the slots out of the window dropped as the clock moves on."""

from __future__ import annotations

from collections import Counter

from fairq.figures import (
    OUTCOME,
    OUTCOME_INDEX,
    RUN,
    WAIT,
    FiguresParams,
    Key,
    TenantFigures,
    figures_from,
)
from fairq.policy import histogram


class FigureTable:
    def __init__(self) -> None:
        self._counts: Counter[Key] = Counter()
        self._first = 0  # no slot before this one is kept

    def waited(self, queue: str, tenant: str, seconds: float, now: float) -> None:
        self._add((queue, tenant, histogram.slot_of(now), WAIT, histogram.bucket_of(seconds)), now)

    def ended(self, queue: str, tenant: str, outcome: str, ran: float | None, now: float) -> None:
        slot = histogram.slot_of(now)
        if ran is not None:
            self._add((queue, tenant, slot, RUN, histogram.bucket_of(ran)), now)
        if outcome != histogram.SUCCEEDED:  # counted by its run time (fairq/figures.py)
            self._add((queue, tenant, slot, OUTCOME, OUTCOME_INDEX[outcome]), now)

    def read(self, params: FiguresParams) -> list[TenantFigures]:
        return figures_from(self._counts.items(), params)

    def _add(self, key: Key, now: float) -> None:
        first = histogram.first_slot(now)
        if first > self._first:  # the window moved on: forget what left it
            self._first = first
            for old in [k for k in self._counts if k[2] < first]:
                del self._counts[old]
        self._counts[key] += 1
