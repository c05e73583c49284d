"""The embedded store: one SQLite file in WAL mode, shared by the processes of one machine."""

from __future__ import annotations

from fairq.backends.sqlite.backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
