"""The PostgreSQL store: ``App("postgresql://user:password@host:5432/db")``.

* **Schema.** fairq keeps its tables in a schema of their own (``?schema=NAME``, default
  ``fairq``) beside the application's, and every statement names it, so the connection's
  ``search_path`` never matters. On first use fairq creates or upgrades it; with
  ``?migrate=false`` it refuses instead and asks for ``fairq migrate --url URL [--schema S]``
  (run it at deploy time as the schema's owner; workers can then use a role with only
  SELECT/INSERT/UPDATE/DELETE and sequence USAGE). A schema made by a newer fairq is refused.
* **Dispatch.** The eligible tenant with the smallest (start tag, head seq) is one entry of an
  index. Dispatches of one queue run side by side, each taking the first tenants no other
  transaction holds, within a stated bound of the exact fair order (exact for one dispatch at
  a time: docs/internals/scheduler.md, "Parallel dispatch"). Dequeue and ack are one round trip
  each (functions/*.sql).
* **Enqueue.** One statement for every caller (producing.py, functions/enqueue.sql), which never
  waits for a dispatch: a job whose tenant another transaction holds waits in the inbox until
  whoever holds that tenant next takes it in.
* **Enqueue in your transaction.** ``backend.enqueue_in(conn, params)``, or
  ``with backend.bound_to(conn): job.enqueue(...)`` for the App API: the job exists if and
  only if your transaction commits (transactional.py).
* **Waiting.** Idle workers block on LISTEN and wake on the NOTIFY an enqueue sends at commit
  (waiting.py).
* **Failures.** Lost connections are re-opened and the call retried (db.py); an unreachable
  server, a missing or foreign schema, or missing privileges raise errors that say what to do.
"""

from __future__ import annotations

from fairq.backends.postgres.backend import PostgresBackend
from fairq.backends.postgres.db import InvalidText, PermissionDenied

__all__ = ["InvalidText", "PermissionDenied", "PostgresBackend"]
