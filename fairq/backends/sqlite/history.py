"""A queue's recorded jobs on SQLite (``Backend.history``, fairq/recorded.py).

Each page is one read transaction (``BEGIN``, deferred): in WAL mode a reader works on a
snapshot and never blocks the writer, nor takes the write lock, so workers dequeue and ack on
while a replay reads. The cursor is the last ``seq`` of a page; a job keeps its seq for life,
so each job comes exactly once (the SQLite store never moves a job between tables).
"""

from __future__ import annotations

import sqlite3

from fairq.backends._sql import load_queries
from fairq.recorded import HistoryPage, HistoryParams, RecordedJob

Q = load_queries("fairq.backends.sqlite", "history.sql")


def read(db: sqlite3.Connection, params: HistoryParams) -> HistoryPage:
    after = -1 if params.cursor is None else int(params.cursor)
    rows = db.execute(
        Q["history_page"],
        {
            "after": after,
            "queue": params.queue,
            "since": params.since,
            "until": params.until,
            "limit": params.limit + 1,
        },
    ).fetchall()
    page = rows[: params.limit]
    more = len(rows) > params.limit
    return HistoryPage(
        jobs=[RecordedJob.from_row(row) for row in page],
        cursor=str(page[-1]["seq"]) if more else None,
    )
