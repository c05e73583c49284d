"""The demo's own corner of a store the user names, removed at the end (Ctrl-C too).

``fairq demo --url …`` shows fairq on the user's own server without leaving its queues and
thousands of succeeded jobs there: a fresh Redis key prefix, a fresh PostgreSQL schema, or a
SQLite file of its own beside the one named. ``--keep`` keeps it and says where.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fairq.backends import check_url, needs_extra
from fairq.backends.sqlite.url import path_from_url


@contextmanager
def demo_namespace(url: str, *, keep: bool = False) -> Iterator[str]:
    """The URL of a fresh namespace on ``url``'s server; it is removed on exit unless ``keep``."""
    run = uuid.uuid4().hex[:12]
    kind = check_url(url)
    remove: Callable[[], None]
    if kind == "sqlite":
        path = path_from_url(url).with_name(f"fairq-demo-{run}.db")
        own, remove = f"sqlite:///{path}", lambda: _remove_sqlite(path)
    elif kind == "redis":
        own = _with_option(url, "prefix", f"fairq-demo-{run}")
        remove = lambda: _remove_redis(own)  # noqa: E731
    elif kind == "postgresql":
        own = _with_option(url, "schema", f"fairq_demo_{run}")
        remove = lambda: _remove_postgres(own)  # noqa: E731
    else:
        raise ValueError(f"no demo namespace for {kind} stores")
    try:
        yield own
    finally:
        if not keep:
            remove()


def _with_option(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != name]
    return urlunsplit(parts._replace(query=urlencode([*query, (name, value)])))


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def _remove_redis(url: str) -> None:
    with needs_extra("redis"):
        from fairq.backends.redis.db import open_client
        from fairq.backends.redis.url import parse_url
    options = parse_url(url)
    client = open_client(options)
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{options.prefix}:*", count=1000):
            batch.append(key)
            if len(batch) == 1000:
                client.unlink(*batch)
                batch.clear()
        if batch:
            client.unlink(*batch)
    finally:
        client.close()


def _remove_postgres(url: str) -> None:
    with needs_extra("postgresql"):
        import psycopg

        from fairq.backends.postgres.sql import quote_ident
        from fairq.backends.postgres.url import parse_url
    parsed = parse_url(url)
    with psycopg.connect(parsed.conninfo, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(parsed.schema)} CASCADE")
