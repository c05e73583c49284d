"""Results kept with acks on PostgreSQL (fairq/results.py).

An ack without results is one statement (``ack_many``, or ``ack_and_dequeue``): unchanged. An
ack that keeps results runs that statement in a transaction and stores the results of the
tokens it acked in a second one (``results_keep``), so the jobs and their results commit
together; each result is kept until its job's finished_at (the ack's own time, after the
server's clock: functions/clock.sql) plus its seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import Row
from fairq.backends.postgres.results import Parsed
from fairq.results import JobResult


def ack_keeping(
    cur: Cursor[Row],
    q: Queries,
    args: dict[str, Any],
    tokens: Sequence[str],
    parsed: Sequence[Parsed],
    results: Mapping[str, JobResult],
) -> list[str]:
    """``ack_many``'s statuses, the results of the tokens it acked stored with them."""
    (row,) = cur.execute(q["ack_many"], args).fetchall()
    statuses = list(row["statuses"])
    keep(cur, q, tokens, parsed, statuses, results)
    return statuses


def keep(
    cur: Cursor[Row],
    q: Queries,
    tokens: Sequence[str],
    parsed: Sequence[Parsed],
    statuses: Sequence[str],
    results: Mapping[str, JobResult],
) -> None:
    """Store the results of the tokens acked ('ok'); ``statuses`` has one per token parsed."""
    answers = iter(statuses)
    ids: list[str] = []
    values: list[str] = []
    keeps: list[float] = []
    for token, found in zip(tokens, parsed, strict=True):
        if found is None:
            continue
        result = results.get(token)
        if next(answers) == "ok" and result is not None:
            ids.append(found[0])
            values.append(result.value)
            keeps.append(result.keep)
    if ids:
        cur.execute(q["results_keep"], {"ids": ids, "values": values, "keeps": keeps})
