"""The SQLite backend's SQL, loaded once from the .sql files beside this module."""

from __future__ import annotations

import functools
import re
from importlib.resources import files

from fairq.backends._sql import load_queries, read_resource, split_statements

PACKAGE = "fairq.backends.sqlite"
Q = load_queries(PACKAGE, "queries.sql")

_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@functools.cache
def migrations() -> list[tuple[int, list[str]]]:
    """Every numbered migration as (version, statements), in order; versions must run 1, 2, …"""
    found = sorted(
        (int(match.group(1)), entry.name)
        for entry in files(PACKAGE).joinpath("migrations").iterdir()
        if (match := _MIGRATION.match(entry.name))
    )
    versions = [version for version, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"SQLite migrations are not numbered 1..n without gaps: {versions}")
    return [
        (version, split_statements(read_resource(PACKAGE, f"migrations/{name}")))
        for version, name in found
    ]


LATEST_VERSION = len(migrations())
