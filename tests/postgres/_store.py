"""Fresh, isolated PostgreSQL stores for tests: a schema of their own each, empty when opened.

The server is ``$FAIRQ_TEST_POSTGRES_URL`` (default: the local test database). When it cannot
be reached, opening a store raises StoreUnavailable, so the tests fail: they never skip.

Making a schema (its tables, indexes and functions) takes a third of a second, leaves hundreds
of dead catalog rows behind on a server that does not vacuum them, and every session compiles
the new schema's functions again. So ``open_disposable`` lends schemas: a store's schema, once
it is closed, is emptied with TRUNCATE (new empty files, as a new schema's) and lent to the next
store this test process opens. A schema the test changed (its catalog differs from when it was
made: a table added, a table's settings changed), that ANALYZE gave statistics, or that cannot
be emptied at once is dropped instead. The schemas left are dropped when the process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import uuid
from typing import Any

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
    """A PostgresBackend in a schema of its own that disappears on ``close``: dropped, or
    emptied and lent again when ``open_disposable`` lent it."""

    closed = False

    def close(self) -> None:
        if self.closed:
            return  # once lent again, the schema is another store's
        self.closed = True
        try:
            super().close()
        finally:
            _give_back(self.schema, self.url.conninfo)


_shared_pools: dict[str, Pool] = {}


def shared_pool(url: str) -> Pool:
    """One small pool per server for all test stores (a test may hold many stores open)."""
    if url not in _shared_pools:
        _shared_pools[url] = make_pool(parse_url(url))
    return _shared_pools[url]


#: The schemas open_disposable made in this process and has not dropped: each one's server and
#: its catalog's fingerprint when it was made.
_made: dict[str, tuple[str, str]] = {}
#: Per server, the emptied schemas ready to lend.
_free: dict[str, list[str]] = {}


@atexit.register
def _drop_made() -> None:
    """Drop the schemas this process made and kept (lent or ready to lend)."""
    for schema, (server, _) in list(_made.items()):
        with contextlib.suppress(psycopg.Error):
            drop_schema(schema, server)


def open_disposable(url: str | None = None, *, clock: str = "caller") -> DisposableBackend:
    """A store in an empty schema of its own (lent: see the module). ``clock="caller"`` (the
    default here: tests drive virtual clocks) keeps every ``now`` passed; ``"store"`` stamps
    events with the server's clock."""
    url = with_option(url or server_url(), "clock", clock)
    server = parse_url(url).conninfo
    free = _free.setdefault(server, [])
    schema = free.pop() if free else fresh_schema()
    try:
        backend = DisposableBackend(url, schema=schema, pool=shared_pool(url))
        if schema not in _made:
            with psycopg.connect(server, autocommit=True) as conn:
                _made[schema] = (server, _fingerprint(conn, schema))
        return backend
    except BaseException:
        _made.pop(schema, None)
        with contextlib.suppress(psycopg.Error):
            drop_schema(schema, server)
        raise


# What a test may change in a schema, without the names of its objects' ids (which differ
# between schemas): its relations and their settings, columns, constraints, functions,
# privileges, and the versions and function files recorded as applied.
_FINGERPRINT = """
SELECT md5(string_agg(item, ',' ORDER BY item)) FROM (
    SELECT concat('n', nspacl) AS item FROM pg_namespace WHERE oid = %(ns)s
    UNION ALL SELECT concat('r', relname, relkind, relpersistence, reloptions, relacl)
        FROM pg_class WHERE relnamespace = %(ns)s
    UNION ALL SELECT concat('a', c.relname, '.', a.attname, format_type(a.atttypid, a.atttypmod),
            a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = %(ns)s AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL SELECT concat('c', conname, contype) FROM pg_constraint WHERE connamespace = %(ns)s
    UNION ALL SELECT concat('t', tgname) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = %(ns)s
    UNION ALL SELECT concat('p', proname, pg_get_function_identity_arguments(oid), md5(prosrc),
            proconfig, proacl)
        FROM pg_proc WHERE pronamespace = %(ns)s
) AS items
"""


# The tables that hold rows or dead rows (a table never written has no pages): TRUNCATE costs
# tens of milliseconds a table, so the others are left as they are, empty.
_WRITTEN = """
SELECT format('%%I.%%I', schemaname, tablename) FROM pg_tables
WHERE schemaname = %(schema)s AND tablename NOT IN ('fairq_migrations', 'fairq_functions')
    AND pg_relation_size(format('%%I.%%I', schemaname, tablename)) > 0
"""
# Every sequence used starts again, as a new schema's would (one may serve another table: the
# inbox takes its numbers from the jobs' sequence).
_RESTART_SEQUENCES = """
SELECT setval(format('%%I.%%I', schemaname, sequencename), start_value, false)
FROM pg_sequences WHERE schemaname = %(schema)s AND last_value IS NOT NULL
"""


def _fingerprint(conn: psycopg.Connection[Any], schema: str) -> str:
    namespace = conn.execute("SELECT %s::regnamespace::oid", [quote_ident(schema)]).fetchone()
    assert namespace is not None
    row = conn.execute(_FINGERPRINT, {"ns": namespace[0]}).fetchone()
    assert row is not None
    recorded = [
        conn.execute(f"SELECT * FROM {quote_ident(schema)}.{table} ORDER BY 1").fetchall()
        for table in ("fairq_migrations", "fairq_functions")
    ]
    return f"{row[0]} {recorded}"


def _give_back(schema: str, server: str) -> None:
    """Empty a lent schema and keep it for the next store, or drop it (see the module)."""
    if schema not in _made:
        drop_schema(schema, server)
        return
    try:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '5s'")  # a killed peer's session may still hold it
            analyzed = conn.execute(
                "SELECT 1 FROM pg_stats WHERE schemaname = %s LIMIT 1", [schema]
            ).fetchone()
            if analyzed is None and _fingerprint(conn, schema) == _made[schema][1]:
                written = conn.execute(_WRITTEN, {"schema": schema}).fetchall()
                if written:
                    conn.execute(f"TRUNCATE {', '.join(t for (t,) in written)}")
                conn.execute(_RESTART_SEQUENCES, {"schema": schema})
                _free.setdefault(server, []).append(schema)
                return
    except psycopg.Error:
        pass
    _made.pop(schema)
    drop_schema(schema, server)


def with_option(url: str, key: str, value: str) -> str:
    """``url`` with one more query parameter."""
    return f"{url}{'&' if '?' in url else '?'}{key}={value}"


def with_user(url: str, user: str) -> str:
    """``url`` with another user name and no password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))
