"""One fresh store URL of each kind, for tests that run real worker processes on every store:
a SQLite file in the test's directory, a Redis key prefix of its own, a PostgreSQL schema of its
own (emptied or dropped at the end: tests/postgres/_store.py)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KINDS = ["sqlite", "redis", "postgres"]


@contextmanager
def fresh_url(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'q.db'}"
    elif kind == "redis":
        base = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
        yield f"{base}?prefix=p{uuid.uuid4().hex[:8]}"
    else:
        from postgres._store import open_disposable, server_url, with_option

        backend = open_disposable(clock="store")  # an empty schema, given back when closed
        try:
            yield with_option(server_url(), "schema", backend.schema)
        finally:
            backend.close()
