"""Fresh, isolated PostgreSQL stores for tests: one new schema each, dropped when closed.

The server is ``$FAIRQ_TEST_POSTGRES_URL`` (default: the local test database). When it cannot
be reached, opening a store raises StoreUnavailable, so the tests fail: they never skip.
"""

from __future__ import annotations

import contextlib
import os
import uuid

import psycopg

from fairq.backends.postgres import PostgresBackend
from fairq.backends.postgres.db import Pool, make_pool
from fairq.backends.postgres.sql import quote_ident
from fairq.backends.postgres.url import parse_url

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
# keyword arguments of psycopg.connect for a raw connection that calls fairq's functions with
# virtual times: the session setting ?clock=caller gives a store's pool (functions/clock.sql)
CALLER_CLOCK = {"options": "-c fairq.clock=caller"}


def server_url() -> str:
    return os.environ.get("FAIRQ_TEST_POSTGRES_URL", DEFAULT_URL)


def fresh_schema() -> str:
    return f"fq_test_{uuid.uuid4().hex[:16]}"


def drop_schema(schema: str, url: str | None = None) -> None:
    """Drop the schema; when a session still reading it (a pool connection finishing its
    last statement) makes the server pick the drop as a deadlock's victim, drop again."""
    for attempt in range(5):
        try:
            with psycopg.connect(url or server_url(), autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(schema)} CASCADE")
            return
        except psycopg.errors.DeadlockDetected:
            if attempt == 4:
                raise


class DisposableBackend(PostgresBackend):
    """A PostgresBackend in a schema of its own that disappears on ``close``."""

    def close(self) -> None:
        try:
            super().close()
        finally:
            drop_schema(self.schema, self.url.conninfo)


_shared_pools: dict[str, Pool] = {}


def shared_pool(url: str) -> Pool:
    """One small pool per server for all test stores (a test may hold many stores open)."""
    if url not in _shared_pools:
        _shared_pools[url] = make_pool(parse_url(url))
    return _shared_pools[url]


def open_disposable(url: str | None = None, *, clock: str = "caller") -> DisposableBackend:
    """A store in a new schema. ``clock="caller"`` (the default here: tests drive virtual
    clocks) keeps every ``now`` passed; ``"store"`` stamps events with the server's clock."""
    url = with_option(url or server_url(), "clock", clock)
    schema = fresh_schema()
    try:
        return DisposableBackend(url, schema=schema, pool=shared_pool(url))
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            drop_schema(schema, url)
        raise


def with_option(url: str, key: str, value: str) -> str:
    """``url`` with one more query parameter."""
    return f"{url}{'&' if '?' in url else '?'}{key}={value}"


def with_user(url: str, user: str) -> str:
    """``url`` with another user name and no password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))
