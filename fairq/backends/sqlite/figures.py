"""The SQLite store's figures (fairq/figures.py): the counts of one write transaction are
gathered in a Tally and added in one ``executemany`` at its end (``flushed``), so a batch
dequeue or ack costs one more statement, not one per job.

The steps that dispatch and end runs (consuming.py, events.py) add to the tally of the
transaction running on their connection (``tally``); a write runs under the store's lock, one
at a time per connection, so the connection names the transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar
from weakref import WeakKeyDictionary

from fairq.backends.sqlite.sql import Q
from fairq.figures import FiguresParams, Key, Tally, TenantFigures, figures_from
from fairq.policy import histogram

T = TypeVar("T")

# Per connection (fairq.backends.sqlite.migrate.Connection, weakly referenced: an entry goes with
# its connection): the running write's tally (by tenant id), and the first slot it last pruned to.
_open: WeakKeyDictionary[sqlite3.Connection, Tally[int]] = WeakKeyDictionary()
_pruned: WeakKeyDictionary[sqlite3.Connection, int] = WeakKeyDictionary()


def tally(db: sqlite3.Connection) -> Tally[int] | None:
    """The running write's tally; None outside ``flushed`` (such writes record nothing)."""
    return _open.get(db)


def flushed(db: sqlite3.Connection, now: float, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` (inside the caller's write transaction), then add what it tallied in the
    slot of ``now``, and drop the slots that left the window (once per slot and connection)."""
    counts: Tally[int] = Tally()
    _open[db] = counts
    try:
        result = work(db)
    finally:
        del _open[db]
    if counts:
        slot = histogram.slot_of(now)
        db.executemany(
            Q["figures_add"],
            [
                {"slot": slot, "tenant_id": who, "kind": kind, "bucket": bucket, "count": n}
                for who, kind, bucket, n in counts.rows()
            ],
        )
        first = histogram.first_slot(now)
        if _pruned.get(db, first - 1) < first:
            db.execute(Q["figures_prune"], {"first": first})
            _pruned[db] = first
    return result


def read(db: sqlite3.Connection, params: FiguresParams) -> list[TenantFigures]:
    rows = db.execute(
        Q["figures_read"], {"first": histogram.first_slot(params.now), "queue": params.queue}
    ).fetchall()
    counts: list[tuple[Key, int]] = [
        ((r["queue"], r["tenant"], r["slot"], r["kind"], r["bucket"]), r["count"]) for r in rows
    ]
    return figures_from(counts, params)
