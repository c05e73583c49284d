"""Connections: a pool, short transactions, and clear errors when the server goes away.

Each backend call runs ``work`` in one transaction on a pooled connection. When the server
drops connections (a restart, ``pg_terminate_backend``), the pool's idle connections are dead
too: the call checks the pool, drops them and runs ``work`` again on a fresh connection, for
up to ``reconnect_wait`` seconds. A failure during COMMIT is never retried, because whether
the transaction took effect is unknown; the caller gets StoreUnavailable saying so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import Connection, Cursor
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from fairq.backends.postgres.records import Row
from fairq.backends.postgres.url import PostgresUrl
from fairq.errors import FairqError, StoreUnavailable

T = TypeVar("T")
log = logging.getLogger("fairq.backends.postgres")

CONNECT_TIMEOUT = 10


class PermissionDenied(StoreUnavailable):
    """The database role lacks a privilege fairq needs on its schema."""


def connect(url: PostgresUrl, *, autocommit: bool = True) -> Connection[Row]:
    """One connection outside the pool (migrations, LISTEN), with a clear error if refused."""
    try:
        return psycopg.connect(
            url.conninfo,
            autocommit=autocommit,
            row_factory=dict_row,
            connect_timeout=CONNECT_TIMEOUT,
        )
    except psycopg.OperationalError as exc:
        raise unavailable(url, exc) from None


def unavailable(url: PostgresUrl, exc: BaseException) -> StoreUnavailable:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreUnavailable(
        f"cannot reach the PostgreSQL store {url.display}: {reason}. "
        "Check the URL and that the server runs and accepts connections."
    )


def permission_denied(url: PostgresUrl, exc: BaseException) -> PermissionDenied:
    reason = str(exc).strip().splitlines()[0]
    schema = url.schema
    return PermissionDenied(
        f"the database role of {url.display} lacks a privilege fairq needs ({reason}). "
        f"Run `fairq migrate` as the schema's owner, or grant the role: GRANT USAGE ON SCHEMA "
        f"{schema} TO <role>; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
        f"{schema} TO <role>; GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO <role>;"
    )


class InvalidText(FairqError, ValueError):
    """PostgreSQL refused a value of the call (most often a NUL character in a text)."""


def invalid_text(exc: psycopg.DataError) -> InvalidText:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return InvalidText(
        f"PostgreSQL refused a value of this call ({reason}); nothing was stored. Text stored "
        "in PostgreSQL (tenant ids, job ids, job and queue names, errors) cannot contain the "
        "NUL character '\\x00': remove it from the value."
    )


Pool = ConnectionPool[Connection[Row]]


def make_pool(url: PostgresUrl) -> Pool:
    """A pool whose connections fit every statement here: autocommit (transactions are
    explicit), rows as dicts, and the URL's clock as the session setting ``fairq.clock`` that
    functions/clock.sql reads. Stores in several schemas of one database may share one if
    their URLs name the same clock."""
    pool: Pool = ConnectionPool(connection_class=Connection[Row], **pool_options(url, "fairq"))
    pool.open(wait=False)
    return pool


def connection_settings(url: PostgresUrl) -> dict[str, object]:
    """The settings of a pool's connections, blocking or asyncio (aio.py)."""
    kwargs: dict[str, object] = {"autocommit": True, "row_factory": dict_row}
    if url.clock != "store":
        kwargs["options"] = f"-c fairq.clock={url.clock}"
    return kwargs


def pool_options(url: PostgresUrl, name: str) -> dict[str, Any]:
    """The options of a pool of the URL's connections, blocking or asyncio (aio.py), opened
    by its owner."""
    return {
        "conninfo": url.conninfo,
        "min_size": 1,
        "max_size": url.pool_size,
        "kwargs": connection_settings(url),
        "open": False,
        "name": f"{name}:{url.display}",
    }


def commit_lost(url: PostgresUrl, exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        f"the connection to {url.display} was lost while committing; the "
        f"outcome of this call is unknown ({exc})"
    )


class Attempt:
    """One try of a transaction: whether it reached its commit (a connection lost there leaves
    the outcome unknown, so it is never tried again)."""

    committing = False


@contextmanager
def attempt(url: PostgresUrl) -> Iterator[Attempt]:
    """The errors of one try, blocking or asyncio, as fairq's: ``Retry`` when the connection
    was lost before the commit, StoreUnavailable when it was lost at the commit or no
    connection came, PermissionDenied and InvalidText for what the server refused."""
    this = Attempt()
    try:
        yield this
    except PoolTimeout as exc:  # an OperationalError too: first
        raise unavailable(url, exc) from None
    except psycopg.OperationalError as exc:
        if this.committing:
            raise commit_lost(url, exc) from exc
        raise Retry(exc) from exc
    except psycopg.errors.InsufficientPrivilege as exc:
        raise permission_denied(url, exc) from None
    except psycopg.DataError as exc:
        raise invalid_text(exc) from None


class Reconnect:
    """When to try again after a lost connection: after pauses of 0.05 s doubling to 1 s, for
    up to ``wait`` seconds in all; then StoreUnavailable."""

    def __init__(self, url: PostgresUrl, wait: float) -> None:
        self.url = url
        self.give_up = time.monotonic() + wait
        self._pause = 0.05

    def pause(self, retry: Retry) -> float:
        """The pause before the next try (said in the log), or StoreUnavailable."""
        if time.monotonic() >= self.give_up:
            raise unavailable(self.url, retry.cause) from retry.cause
        log.warning("PostgreSQL connection lost (%s); reconnecting", retry.cause)
        pause, self._pause = self._pause, min(self._pause * 2, 1.0)
        return pause


class Database:
    """A connection pool for one store; ``run`` gives ``work`` one transaction."""

    def __init__(
        self, url: PostgresUrl, *, pool: Pool | None = None, reconnect_wait: float = 30.0
    ) -> None:
        self.url = url
        self.reconnect_wait = reconnect_wait
        self._owns_pool = pool is None
        self.pool = make_pool(url) if pool is None else pool

    def run(self, work: Callable[[Cursor[Row]], T], *, explicit: bool = True) -> T:
        """Run ``work`` in a transaction (``explicit=False``: its statement's own implicit
        one); reconnect and run again if the connection was lost before the commit
        (``Reconnect``).

        Not in libpq's pipeline mode: under load, an enqueue that read a result (``RETURNING``)
        after an ``executemany`` in a pipeline was once handed the INSERT's status instead
        (psycopg 3.3.9, not reproducible on demand), so the few round trips saved are not worth
        it.
        """
        reconnect = Reconnect(self.url, self.reconnect_wait)
        while True:
            try:
                return self._attempt(work, explicit)
            except Retry as retry:
                pause = reconnect.pause(retry)
                self.pool.check()
                time.sleep(pause)

    def run_one(self, statement: str, params: dict[str, object]) -> list[Row]:
        """One statement outside an explicit transaction: its own implicit transaction, one
        round trip. Retried like ``run`` when the connection was lost before the result came:
        only for statements whose repetition is safe (a dequeue hands out a job that nobody
        runs, which its lease then returns; a repeated ack reports LeaseNotFound)."""
        return self.run(lambda cur: cur.execute(statement, params).fetchall(), explicit=False)

    def _attempt(self, work: Callable[[Cursor[Row]], T], explicit: bool) -> T:
        with attempt(self.url) as this, self.pool.connection(timeout=self.reconnect_wait) as conn:
            if not explicit:
                with conn.cursor() as cur:
                    return work(cur)
            with conn.transaction():
                with conn.cursor() as cur:
                    result = work(cur)
                this.committing = True
            return result

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()


class Retry(Exception):
    """A call to run again on a fresh connection: its connection was lost before commit."""

    def __init__(self, cause: psycopg.OperationalError) -> None:
        super().__init__(str(cause))
        self.cause = cause
