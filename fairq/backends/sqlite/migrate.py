"""Opening a SQLite file safely: refuse what is not ours, then migrate it to the latest schema.

Nothing is written before the file is known to be empty or fairq's own: a stray path in a
URL must never turn somebody's database (or any other file) into a job queue.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from fairq.backends.sqlite.db import Store, retry_while_locked
from fairq.backends.sqlite.sql import LATEST_VERSION, Q, migrations
from fairq.errors import SchemaError, StoreUnavailable

SQLITE_HEADER = b"SQLite format 3\x00"
APPLICATION = "fairq"


class Connection(sqlite3.Connection):
    """The store's connections: weakly referenceable (a plain sqlite3.Connection is not), so
    state kept per connection (figures.py) goes with it, never to a later one at its address."""


def connect(path: Path, *, busy_timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (we issue BEGIN ourselves), usable from any thread."""
    check_file(path)
    try:
        conn = sqlite3.connect(
            str(path),
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            factory=Connection,
        )
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open SQLite store {path}: {exc}") from exc
    conn.row_factory = sqlite3.Row
    return conn


def check_file(path: Path) -> None:
    """Fail early, naming the path, for what SQLite would report only as 'unable to open'."""
    if path.is_dir():
        raise StoreUnavailable(f"SQLite store path {path} is a directory; name a file in it")
    if not path.parent.is_dir():
        raise StoreUnavailable(
            f"cannot create SQLite store {path}: {path.parent} is not an existing directory"
        )
    if not path.exists():
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise StoreUnavailable(f"cannot create SQLite store {path}: {path.parent} is read-only")
        return
    if not os.access(path, os.R_OK | os.W_OK):
        raise StoreUnavailable(f"SQLite store {path} is not readable and writable by this user")
    with path.open("rb") as file:
        header = file.read(len(SQLITE_HEADER))
    if header and header != SQLITE_HEADER:
        raise StoreUnavailable(
            f"{path} is not a SQLite database (it starts with {header!r}); fairq leaves it "
            "untouched. Point the store URL at a new file."
        )


def prepare(store: Store) -> None:
    """Check ownership and version, switch to WAL, and apply the migrations this file lacks."""
    version = store.read(lambda db: installed_version(db, store.path))
    _enable_wal(store)
    # In WAL mode NORMAL survives any process crash (SIGKILL included) with nothing lost;
    # only a power cut or OS crash can drop the last commits. FULL would fsync every commit
    # and cost milliseconds per dequeue.
    store.conn.execute("PRAGMA synchronous = NORMAL")
    if version < LATEST_VERSION:
        store.write(lambda db: _migrate(db, store.path))


def installed_version(db: sqlite3.Connection, path: Path) -> int:
    """0 for an empty file; the recorded version for fairq's; SchemaError for anything else."""
    objects = db.execute(Q["schema_objects"]).fetchall()
    if not objects:
        return 0
    if "fairq_meta" not in {row["name"] for row in objects if row["type"] == "table"}:
        tables = sorted(row["name"] for row in objects if row["type"] == "table")
        raise SchemaError(
            f"{path} is a SQLite database but not fairq's (its tables: {', '.join(tables)}); "
            "fairq leaves it untouched. Point the store URL at a new file."
        )
    application = _meta(db, "application")
    version_text = _meta(db, "schema_version")
    if application != APPLICATION or version_text is None or not version_text.isdigit():
        raise SchemaError(
            f"{path} has a fairq_meta table but no fairq schema version "
            f"(application={application!r}, schema_version={version_text!r})"
        )
    version = int(version_text)
    if version > LATEST_VERSION:
        raise SchemaError(
            f"{path} has schema version {version}, newer than the {LATEST_VERSION} this fairq "
            "knows: it was written by a newer fairq. Upgrade fairq here; do not downgrade."
        )
    return version


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    """Apply missing migrations; re-reads the version so concurrent openers migrate once."""
    current = installed_version(db, path)
    for version, statements in migrations():
        if version <= current:
            continue
        for statement in statements:
            db.execute(statement)
        db.execute(Q["meta_set"], {"key": "application", "value": APPLICATION})
        db.execute(Q["meta_set"], {"key": "schema_version", "value": str(version)})


def _meta(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute(Q["meta_get"], {"key": key}).fetchone()
    return None if row is None else str(row["value"])


def _enable_wal(store: Store) -> None:
    """WAL lets readers and the single writer proceed at once; the mode is kept in the file."""

    def switch() -> str:
        return str(store.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])

    mode = retry_while_locked(switch, store)
    if mode.lower() != "wal":
        raise StoreUnavailable(
            f"SQLite store {store.path} cannot use write-ahead logging (journal mode {mode!r}); "
            "put it on a local file system"
        )
