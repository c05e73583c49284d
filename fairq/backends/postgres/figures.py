"""The PostgreSQL store's figures (fairq/figures.py), table ``figures``: dispatch and ack_held
count waits and acked runs in their own statements (functions/); a fail or an expiry, done
here in Python, is gathered in its transaction's tally (``Events.figures``) and written in one
statement before the commit (``write``); ``maintain`` deletes the slots out of the window."""

from __future__ import annotations

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import Row
from fairq.figures import FiguresParams, Key, Tally, TenantFigures, figures_from
from fairq.policy import histogram


def write(cur: Cursor[Row], q: Queries, tally: Tally[int], now: float) -> None:
    if not tally:
        return
    rows = [(who, kind, bucket) for who, kind, bucket, n in tally.rows() for _ in range(n)]
    cur.execute(
        q["figures_add"],
        {
            "now": now,
            "tenants": [who for who, _, _ in rows],
            "kinds": [kind for _, kind, _ in rows],
            "buckets": [bucket for _, _, bucket in rows],
        },
    )
    tally.counts.clear()


def prune(cur: Cursor[Row], q: Queries, now: float) -> None:
    cur.execute(q["figures_prune"], {"first": histogram.first_slot(now)})


def read(cur: Cursor[Row], q: Queries, params: FiguresParams) -> list[TenantFigures]:
    args = {"first": histogram.first_slot(params.now), "queue": params.queue}
    counts: list[tuple[Key, int]] = [
        ((r["queue"], r["tenant"], r["slot"], r["kind"], r["bucket"]), r["count"])
        for r in cur.execute(q["figures_read"], args).fetchall()
    ]
    return figures_from(counts, params)
