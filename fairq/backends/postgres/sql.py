"""The PostgreSQL backend's SQL, loaded once from the .sql files beside this module.

Every statement names its tables as ``{schema}.table``; ``for_schema`` fills in the quoted
schema name once per backend, so no statement depends on the connection's ``search_path``
(which matters for enqueues that run on the application's own connection).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from fairq.backends._sql import Queries, parse_queries, read_resource
from fairq.errors import ConfigError

PACKAGE = "fairq.backends.postgres"
_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_FUNCTION_FILE = re.compile(r"^[a-z0-9_]+\.sql$")
_DEFINES = re.compile(r"^CREATE (?:OR REPLACE )?FUNCTION \{schema\}\.([a-z0-9_]+)\(", re.MULTILINE)
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

#: The release of the files in functions/, and the digest of their text (``functions_digest``).
#: Bump the release (and set the new digest) whenever a file changes: a process applies its
#: functions only over an older release, and refuses a schema whose functions come from a newer
#: one, so during a rolling deploy an old worker that restarts never puts its functions back
#: over the new ones. tests/postgres/test_migrations.py fails when the digest is stale.
FUNCTIONS_RELEASE = 13
FUNCTIONS_DIGEST = "17266420bfad03ba4d9cc92683649a326899b6a79046efa84383a6c0fb9a2fa6"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    script: str  # still holding the {schema} placeholder


@dataclass(frozen=True)
class FunctionFile:
    """One file of functions/: applied whole whenever its text changes (migrate.py)."""

    name: str
    script: str  # still holding the {schema} placeholder

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.script.encode()).hexdigest()

    @property
    def defines(self) -> list[str]:
        """The names of the functions the file creates (dropped first, so a file may change a
        function's arguments or result)."""
        return _DEFINES.findall(self.script)


def check_schema_name(name: str) -> str:
    """A schema name fairq can quote without surprises: letters, digits and ``_``, ≤ 63."""
    if not isinstance(name, str) or not _SCHEMA_NAME.match(name):
        raise ConfigError(
            f"schema name {name!r} is invalid: use letters, digits and '_' (not first), "
            "at most 63 characters"
        )
    return name


def quote_ident(name: str) -> str:
    return '"' + check_schema_name(name) + '"'


def fill_schema(text: str, schema: str) -> str:
    return text.replace("{schema}", quote_ident(schema))


@cache
def _raw_queries() -> Queries:
    """The named blocks of every file of queries/ (one file per step), as one set."""
    names = sorted(e.name for e in files(PACKAGE).joinpath("queries").iterdir())
    return merge_queries(
        (name, read_resource(PACKAGE, f"queries/{name}")) for name in names if name.endswith(".sql")
    )


def merge_queries(texts: Iterable[tuple[str, str]]) -> Queries:
    """The named blocks of several files, (file name, text), as one set: a name is unique
    across the files, and one defined twice is refused naming both files."""
    where: dict[str, str] = {}
    blocks: dict[str, str] = {}
    for name, text in texts:
        found = parse_queries(text, f"queries/{name}")
        for query in found:
            if query in where:
                raise ValueError(
                    f"query {query!r} is defined in queries/{where[query]} and in "
                    f"queries/{name} ({PACKAGE}): give one of them another name"
                )
            where[query] = name
            blocks[query] = found[query]
    return Queries(f"{PACKAGE}/queries/*.sql", blocks)


@cache
def queries_for(schema: str) -> Queries:
    """The named blocks of queries/ with ``{schema}`` filled in."""
    raw = _raw_queries()
    text = "\n\n".join(f"-- name: {name}\n{raw[name]}" for name in raw)
    return parse_queries(fill_schema(text, schema), f"{PACKAGE}/queries/*.sql")


@cache
def migrations() -> tuple[Migration, ...]:
    """Every numbered migration, in order; versions must run 1, 2, … without gaps."""
    found = sorted(
        (int(match.group(1)), match.group(2), entry.name)
        for entry in files(PACKAGE).joinpath("migrations").iterdir()
        if (match := _MIGRATION.match(entry.name))
    )
    versions = [version for version, _, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"PostgreSQL migrations are not numbered 1..n without gaps: {versions}")
    return tuple(
        Migration(version, name, read_resource(PACKAGE, f"migrations/{filename}"))
        for version, name, filename in found
    )


@cache
def function_files() -> tuple[FunctionFile, ...]:
    """Every file of functions/, by name (the order a new schema gets them in)."""
    names = sorted(
        entry.name
        for entry in files(PACKAGE).joinpath("functions").iterdir()
        if _FUNCTION_FILE.match(entry.name)
    )
    return tuple(FunctionFile(name, read_resource(PACKAGE, f"functions/{name}")) for name in names)


def functions_digest(found: tuple[FunctionFile, ...]) -> str:
    """One sha256 over every function file's name and text, in order."""
    digest = hashlib.sha256()
    for file in found:
        digest.update(f"{file.name}\0{file.script}\0".encode())
    return digest.hexdigest()


def latest_version() -> int:
    return len(migrations())


def schema_snapshot() -> str:
    """schema.sql: the current tables and indexes in one file (checked against the
    migrations)."""
    return read_resource(PACKAGE, "schema.sql")
