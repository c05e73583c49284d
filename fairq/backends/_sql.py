"""Named SQL blocks read from ``.sql`` files, so no query lives in a Python string.

A file holds sections, each opened by a ``-- name: <name>`` line (as in procrastinate's
``queries.sql``); the comment lines right after it document the block and are kept as part of
its text (SQLite and PostgreSQL both ignore them). Migrations are whole files split into
statements here, because ``executescript`` would commit the surrounding transaction first.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Mapping
from importlib.resources import files

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")


class Queries(Mapping[str, str]):
    """The named blocks of one file. A missing name is a bug, reported with the file's name."""

    def __init__(self, source: str, blocks: dict[str, str]) -> None:
        self.source = source
        self._blocks = blocks

    def __getitem__(self, name: str) -> str:
        try:
            return self._blocks[name]
        except KeyError:
            raise KeyError(f"no query named {name!r} in {self.source}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._blocks)

    def __len__(self) -> int:
        return len(self._blocks)


def parse_queries(text: str, source: str = "<string>") -> Queries:
    """Split ``text`` at ``-- name:`` lines; a name given twice is an error, never an override."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _NAME.match(line.strip())
        if match:
            name = match.group(1)
            if name in blocks:
                raise ValueError(f"query {name!r} is defined twice in {source}")
            current = blocks[name] = []
        elif current is not None:
            current.append(line)
    return Queries(source, {name: "\n".join(lines).strip() for name, lines in blocks.items()})


def load_queries(package: str, resource: str) -> Queries:
    """The named blocks of a ``.sql`` file shipped inside ``package``."""
    return parse_queries(read_resource(package, resource), f"{package}/{resource}")


def read_resource(package: str, resource: str) -> str:
    return files(package).joinpath(resource).read_text(encoding="utf-8")


def split_statements(script: str) -> list[str]:
    """Cut a SQLite script into complete statements (trigger bodies stay whole).

    Uses SQLite's own notion of a complete statement, so it is not for PostgreSQL scripts
    with ``$$`` bodies.
    """
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if _has_code(pending):
                statements.append(pending.strip())
            pending = ""
    if _has_code(pending):
        raise ValueError(f"incomplete SQL statement at the end of the script: {pending.strip()!r}")
    return statements


def _has_code(text: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in text.splitlines())
