"""What a PostgreSQL operation asks of the server (fairq.backends.steps): one statement at a
time, its rows sent back. ``run`` performs the statements on a psycopg ``Cursor``, ``arun`` on
an ``AsyncCursor``: the operation itself (which statements, in what order, what the rows mean)
is written once, for the blocking store and the asyncio one (aio.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from psycopg import AsyncCursor, Cursor

from fairq.backends.steps import Steps, adrive, drive

T = TypeVar("T")
Row = dict[str, Any]  # as records.Row (which builds on this module)


@dataclass(frozen=True)
class Sql:
    """One statement. ``many``: run it once per parameter set (``executemany``), no rows back;
    otherwise its rows come back (none for a statement that returns none)."""

    query: str
    params: Mapping[str, Any] | None = None
    many: Sequence[Mapping[str, Any]] | None = None


#: A PostgreSQL operation: yields ``Sql``, is sent each one's rows, returns ``T``.
PgSteps = Steps[Sql, T]


def run(cur: Cursor[Row], steps: PgSteps[T]) -> T:
    """Run ``steps`` in ``cur``'s transaction."""

    def perform(sql: Sql) -> list[Row]:
        if sql.many is not None:
            cur.executemany(sql.query, sql.many)
            return []
        cur.execute(sql.query, sql.params)
        return cur.fetchall() if cur.description is not None else []

    return drive(steps, perform)


async def arun(cur: AsyncCursor[Row], steps: PgSteps[T]) -> T:
    """Run ``steps`` in ``cur``'s transaction, each statement awaited."""

    async def perform(sql: Sql) -> list[Row]:
        if sql.many is not None:
            await cur.executemany(sql.query, sql.many)
            return []
        await cur.execute(sql.query, sql.params)
        return await cur.fetchall() if cur.description is not None else []

    return await adrive(steps, perform)


def first(rows: list[Row]) -> Row | None:
    """``fetchone`` of a statement's rows."""
    return rows[0] if rows else None
