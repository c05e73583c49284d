"""Django: enqueue jobs that commit or roll back with the request's data.

::

    from django.db import transaction
    from fairq.integrations.django import enqueue

    with transaction.atomic():
        order = Order.objects.create(shop=shop, total=total)
        enqueue(send_receipt, order.id, shop=shop.slug)   # send_receipt: an @app.job

Two ways, chosen per call, with one outcome: the job exists if and only if the transaction
around the call commits.

* **In the transaction** (a PostgreSQL fairq store in the very database of Django's connection
  ``using``, with psycopg 3: Django 4.2+): the job is written on Django's own connection
  (``PostgresBackend.bound_to``: fairq/backends/postgres/transactional.py), in a savepoint of
  its transaction. It commits with the order, or rolls back with it; a worker sees it from
  the commit on. A refused enqueue (a duplicate id) raises and leaves the transaction usable.
* **After the commit** (any other store: SQLite, Redis, a PostgreSQL store in another
  database, or Django on psycopg2): the jobs are checked and given their ids at the call,
  and stored by ``transaction.on_commit``: after Django's transaction commits, never when it
  rolls back. Between the commit and the store call there is a moment in which a crash loses
  the job (the data committed, the job not stored); the first way has no such moment.

Either way, bad input (arguments that are not JSON, a missing tenant …) raises at the call,
with the same error as ``job.enqueue``, and the call returns the job's id. Outside
``atomic()`` (autocommit) both store the job at once, as Django stores the data. A job whose
unique key is held gets the holder's id in the first way; in the second, the id made at the
call, under which nothing is stored when the key is still held at the commit. The
``before_enqueue``/``after_enqueue`` hooks run when the store is called: at the call in the
first way, at the commit in the second. Needs the extra ``fairq[django]``.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

try:
    from django.db import DEFAULT_DB_ALIAS, connections, transaction
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "fairq.integrations.django needs Django: pip install 'fairq[django]'"
    ) from exc

from fairq.app import BoundOptions, Call, JobDefinition
from fairq.app.enqueue import performed, prepared, stored
from fairq.backends.steps import drive
from fairq.errors import ConfigError

if TYPE_CHECKING:
    from psycopg import Connection

    from fairq.app import App
    from fairq.backends.postgres import PostgresBackend

__all__ = ["enqueue", "enqueue_many", "in_transaction"]


def enqueue(job: JobDefinition[Any, Any] | BoundOptions[Any], /, *args: Any, **kwargs: Any) -> str:
    """``job.enqueue(*args, **kwargs)`` in Django's transaction on the default database (see
    the module's docstring); ``job`` may be ``job.options(...)``. Returns the job's id."""
    definition = job.definition if isinstance(job, BoundOptions) else job
    app = _app_of(definition)
    return enqueue_many([job.call(*args, **kwargs)], app=app)[0]


def enqueue_many(calls: Iterable[Call], *, app: App, using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """``app.enqueue_many(calls)`` in the transaction of Django's database ``using``: stored
    with it (all of them, or none), or after it commits. Returns the jobs' ids."""
    bound = in_transaction(app, using)
    if bound is not None:
        backend, conn = bound
        with backend.bound_to(conn):
            return app.enqueue_many(calls)
    jobs, now = drive(prepared(app, calls), partial(performed, app))
    transaction.on_commit(lambda: drive(stored(app, jobs, now), partial(performed, app)), using)
    return [job.id for job in jobs]


def in_transaction(
    app: App, using: str = DEFAULT_DB_ALIAS
) -> tuple[PostgresBackend, Connection[Any]] | None:
    """``app``'s PostgreSQL store and Django's psycopg connection ``using``, when the store
    lives in that connection's database (its schema present): enqueues can then join its
    transaction. None otherwise: they wait for its commit instead."""
    if "fairq.backends.postgres" not in sys.modules:  # no PostgreSQL store exists
        return None
    from psycopg import Connection

    from fairq.backends.postgres import PostgresBackend

    backend = app.backend
    django = connections[using]
    if not isinstance(backend, PostgresBackend) or django.vendor != "postgresql":
        return None
    django.ensure_connection()
    raw = django.connection
    if not isinstance(raw, Connection):  # psycopg2
        return None
    return (backend, raw) if _same_database(raw, backend) else None


def _same_database(raw: Connection[Any], backend: PostgresBackend) -> bool:
    """The connection reaches the store's server and database (both connections report the
    same server, by its start time and port, and the same database name: two servers with
    equal names and ports on different hosts are told apart) and the store's schema is there:
    what the inbox insert needs. Asked once per connection."""
    from fairq.backends.postgres.sql import quote_ident

    known = _checked.setdefault(raw, {})
    store = (backend.url.conninfo, backend.schema)
    if store not in known:
        same = _server_of(raw) == backend.db.run(lambda cur: _server_of(cur.connection))
        if same:
            inbox = f"{quote_ident(backend.schema)}.inbox"
            row = raw.execute("SELECT to_regclass(%s) IS NOT NULL", (inbox,)).fetchone()
            same = bool(row and row[0])
        known[store] = same
    return known[store]


def _server_of(conn: Connection[Any]) -> tuple[object, ...]:
    """Which server and database a connection reaches, as the server itself says."""
    from psycopg.rows import tuple_row

    with conn.cursor(row_factory=tuple_row) as cur:  # whatever rows the connection makes
        cur.execute(
            "SELECT pg_postmaster_start_time(), current_setting('port'), current_database()"
        )
        return tuple(cur.fetchone() or ())


#: Per Django connection (weakly: a closed one goes): (store's conninfo, schema) -> in its
#: database.
_checked: weakref.WeakKeyDictionary[Connection[Any], dict[tuple[str, str], bool]] = (
    weakref.WeakKeyDictionary()
)


def _app_of(definition: JobDefinition[Any, Any]) -> App:
    from fairq.app import App

    if not isinstance(definition, JobDefinition):
        raise ConfigError(
            f"{definition!r:.80} is not a fairq job: declare it with @app.job, and pass the "
            "declared job (or job.options(...))"
        )
    if not isinstance(definition.app, App):
        raise ConfigError(f"job {definition.name!r} is not declared on a fairq App")
    return definition.app
