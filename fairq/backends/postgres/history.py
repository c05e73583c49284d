"""A queue's recorded jobs on PostgreSQL (``Backend.history``, fairq/recorded.py).

Each page is one plain ``SELECT`` in its own implicit transaction (history.sql): it takes only
the ACCESS SHARE lock every read takes, which no dequeue, ack or enqueue waits on, and no row
lock (no ``FOR UPDATE``), so live work goes on while a replay reads. A job lives in one of
three tables in turn, inbox, then jobs, then succeeded_jobs; they are read in that order, each
in its primary key's order, so a job that moves during the read is seen again (the contract
allows it: the later copy is the newer) and never missed. The cursor names the table and the
key to continue after.
"""

from __future__ import annotations

from functools import cache

from fairq.backends._sql import Queries, parse_queries, read_resource
from fairq.recorded import HistoryPage, HistoryParams, RecordedJob

from .db import Database
from .sql import PACKAGE, fill_schema

#: The tables, in the order a job moves through them, and each one's query.
_PARTS = (("inbox", "history_inbox"), ("jobs", "history_jobs"), ("done", "history_succeeded"))


@cache
def queries_for(schema: str) -> Queries:
    return parse_queries(
        fill_schema(read_resource(PACKAGE, "history.sql"), schema), f"{PACKAGE}/history.sql"
    )


def read(db: Database, schema: str, params: HistoryParams) -> HistoryPage:
    q = queries_for(schema)
    part, _, key = (params.cursor or "inbox:").partition(":")
    names = [name for name, _ in _PARTS]
    if part not in names:
        raise ValueError(f"not a history cursor of this store: {params.cursor!r}")
    for name, query in _PARTS[names.index(part) :]:
        rows = db.run_one(
            q[query],
            {
                "queue": params.queue,
                "since": params.since,
                "until": params.until,
                "after": int(key) if key and name != "done" else -1,
                "after_id": key if name == "done" else "",
                "limit": params.limit + 1,
            },
        )
        if rows:
            page = rows[: params.limit]
            more = len(rows) > params.limit
            cursor = f"{name}:{page[-1]['key']}" if more else _next(name)
            return HistoryPage(jobs=[RecordedJob.from_row(row) for row in page], cursor=cursor)
        key = ""
    return HistoryPage(jobs=[], cursor=None)


def _next(part: str) -> str | None:
    """The cursor of the first page of the table after ``part`` (None after the last)."""
    names = [name for name, _ in _PARTS]
    at = names.index(part)
    return f"{names[at + 1]}:" if at + 1 < len(names) else None
