"""The schema's versions: apply migrations in order, and refuse a schema this fairq cannot use.

Migrations are numbered ``migrations/NNNN_name.sql`` files holding DDL only;
``fairq_migrations`` records each one applied. The functions live in ``functions/*.sql``: a
file is (re)created whenever its text differs from the one last applied, whose sha256
``fairq_functions`` keeps with the release of the function files that applied it
(``sql.FUNCTIONS_RELEASE``). A newer release is never replaced by an older one: that fairq
refuses the schema, as it refuses a newer schema version. Pending migrations and changed
function files run in one transaction under an advisory lock, so two processes starting at
once never apply anything twice and a failed upgrade leaves nothing half-done.
"""

from __future__ import annotations

import time
import zlib

import psycopg
from psycopg import Connection

from fairq.backends.postgres.db import connect, permission_denied, unavailable
from fairq.backends.postgres.records import Row
from fairq.backends.postgres.sql import (
    FUNCTIONS_RELEASE,
    FunctionFile,
    fill_schema,
    function_files,
    latest_version,
    migrations,
    quote_ident,
)
from fairq.backends.postgres.url import PostgresUrl
from fairq.errors import SchemaError

_MIGRATE_LOCK = zlib.crc32(b"fairq.migrate") - 2**31  # an int4 class id for the advisory lock


def schema_version(conn: Connection[Row], schema: str) -> int | None:
    """The version the schema is at, or None when fairq's tables are not there at all."""
    found = conn.execute(
        "SELECT to_regclass(%(table)s) IS NOT NULL AS present",
        {"table": f"{quote_ident(schema)}.fairq_migrations"},
    ).fetchone()
    if found is None or not found["present"]:
        return None
    row = conn.execute(
        f"SELECT max(version) AS version FROM {quote_ident(schema)}.fairq_migrations"
    ).fetchone()
    return int(row["version"]) if row and row["version"] is not None else 0


def stale_functions(conn: Connection[Row], schema: str) -> list[FunctionFile]:
    """The function files whose text is not the one last applied to the schema; SchemaError
    when the schema's functions come from a newer release than this fairq's."""
    rows = conn.execute(
        f"SELECT file, sha256, release FROM {quote_ident(schema)}.fairq_functions"
    ).fetchall()
    newest = max((row["release"] for row in rows), default=0)
    if newest > FUNCTIONS_RELEASE:
        raise SchemaError(
            f"the fairq schema {schema!r} has functions of release {newest}, made by a newer "
            f"fairq; this fairq's are release {FUNCTIONS_RELEASE}. Upgrade fairq on this machine."
        )
    applied = {row["file"]: row["sha256"] for row in rows}
    return [file for file in function_files() if applied.get(file.name) != file.sha256]


def migrate(url: PostgresUrl) -> list[int]:
    """Bring the schema up to date; returns the versions applied (empty when current)."""
    with connect(url) as conn:
        try:
            return _migrate(conn, url.schema)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise permission_denied(url, exc) from None
        except psycopg.OperationalError as exc:
            raise unavailable(url, exc) from None


def _migrate(conn: Connection[Row], schema: str) -> list[int]:
    with conn.transaction():
        conn.execute(
            "SELECT pg_advisory_xact_lock(%(cls)s, hashtext(%(schema)s))",
            {"cls": _MIGRATE_LOCK, "schema": schema},
        )
        current = schema_version(conn, schema) or 0
        check_not_newer(current, schema)
        applied: list[int] = []
        for migration in migrations()[current:]:
            conn.execute(fill_schema(migration.script, schema))
            conn.execute(
                f"INSERT INTO {quote_ident(schema)}.fairq_migrations (version, name) "
                "VALUES (%(version)s, %(name)s)",
                {"version": migration.version, "name": migration.name},
            )
            applied.append(migration.version)
        for file in stale_functions(conn, schema):
            _apply_functions(conn, schema, file)
        return applied


def _apply_functions(conn: Connection[Row], schema: str, file: FunctionFile) -> None:
    """Drop the functions the file defines (whatever their arguments), create them again."""
    found = conn.execute(
        "SELECT format('%%I.%%I(%%s)', n.nspname, p.proname,"
        " pg_get_function_identity_arguments(p.oid)) AS signature"
        " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = %(schema)s AND p.proname = ANY(%(names)s)",
        {"schema": schema, "names": file.defines},
    ).fetchall()
    for row in found:
        conn.execute(f"DROP FUNCTION {row['signature']}")  # a catalog name, quoted by format
    conn.execute(fill_schema(file.script, schema))
    conn.execute(
        f"INSERT INTO {quote_ident(schema)}.fairq_functions (file, sha256, release) "
        "VALUES (%(file)s, %(sha256)s, %(release)s) ON CONFLICT (file) DO UPDATE "
        "SET sha256 = excluded.sha256, release = excluded.release, applied_at = now()",
        {"file": file.name, "sha256": file.sha256, "release": FUNCTIONS_RELEASE},
    )


def check_not_newer(version: int, schema: str) -> None:
    if version > latest_version():
        raise SchemaError(
            f"the fairq schema {schema!r} is at version {version}, made by a newer fairq; this "
            f"fairq knows versions up to {latest_version()}. Upgrade fairq on this machine."
        )


def ensure_schema(url: PostgresUrl, *, reconnect_wait: float = 30.0) -> None:
    """Check the schema on open; create or upgrade it first if the URL allows."""
    version, stale = _read_state(url, reconnect_wait)
    if version is not None:
        check_not_newer(version, url.schema)
    if version == latest_version() and not stale:
        return
    if not url.migrate:
        found = "has no fairq tables" if version is None else f"is at version {version}"
        if version == latest_version():
            found = f"has functions older or newer than this fairq's ({', '.join(stale)})"
        raise SchemaError(
            f"the fairq schema {url.schema!r} at {url.display} {found}; this fairq needs "
            f"version {latest_version()}. Run `fairq migrate --url URL --schema {url.schema}` "
            "(or drop ?migrate=false to let fairq migrate on first use)."
        )
    migrate(url)


def _read_state(url: PostgresUrl, reconnect_wait: float) -> tuple[int | None, list[str]]:
    """The schema's version and, when it is current, the function files to apply again; a
    connection dropped mid-way (a server restart, an admin killing connections) is retried for
    up to ``reconnect_wait`` s, a refused one fails at once."""
    give_up = time.monotonic() + reconnect_wait
    while True:
        with connect(url) as conn:
            try:
                version = schema_version(conn, url.schema)
                if version != latest_version():
                    return version, []
                return version, [file.name for file in stale_functions(conn, url.schema)]
            except psycopg.errors.InsufficientPrivilege as exc:
                raise permission_denied(url, exc) from None
            except psycopg.OperationalError as exc:
                if time.monotonic() >= give_up:
                    raise unavailable(url, exc) from None
        time.sleep(0.1)
