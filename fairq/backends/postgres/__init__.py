"""The PostgreSQL store: ``postgresql://user:password@host:5432/db?schema=fairq``.

fairq keeps its tables in their own schema (``?schema=``, default ``fairq``) beside the
application's, creates or upgrades it on first use unless ``?migrate=false`` (then run
``fairq migrate``), hands out jobs with per-queue locking that keeps the fair order exact
under concurrency, wakes idle workers with LISTEN/NOTIFY, and can enqueue inside the
application's own transaction (``PostgresBackend.enqueue_in`` / ``bound_to``).
"""

from __future__ import annotations

from fairq.backends.postgres.backend import PostgresBackend
from fairq.backends.postgres.db import PermissionDenied

__all__ = ["PermissionDenied", "PostgresBackend"]
