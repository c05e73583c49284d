"""Storing a queue's defaults: the row, then every tenant that follows them resettled."""

from __future__ import annotations

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.events import Events
from fairq.backends.postgres.inspect import settings_of
from fairq.backends.postgres.records import Row, TenantRow, rate_columns
from fairq.contract import QueueSettings, SetQueueParams


def store_queue(cur: Cursor[Row], q: Queries, params: SetQueueParams, now: float) -> set[str]:
    """(Under the queue's exclusive lock, so the settings ``params`` keeps are read and
    written back with no other change between.) Store the defaults and resettle every tenant
    of the queue (admin path: a scan of its tenants), as their effective settings or rate
    holds may change. Returns the queues whose waiters must be woken (a cap raised or
    removed)."""
    events = Events(cur, q)
    old = cur.execute(q["queue_get"], {"name": params.settings.queue}).fetchone()
    settings = params.apply_to(settings_of(params.settings.queue, old))
    new = cur.execute(
        q["queue_set_defaults"],
        {
            "name": settings.queue,
            "weight": settings.weight,
            "max_running": settings.max_running,
            **rate_columns("rate_", settings.rate),
            "half_life": settings.half_life,
            "max_debt": settings.max_debt,
            "max_in_flight": settings.max_in_flight,
        },
    ).fetchone()
    if _full(old) and not _full(new):
        events.woken.add(settings.queue)
    for row in cur.execute(q["tenants_of_queue"], {"queue": settings.queue}).fetchall():
        tenant = events.find_tenant(row["id"])
        if tenant is not None:  # else forgotten by a concurrent prune
            inherit(tenant, settings)
            events.resettle(tenant, now)
    return events.woken


def inherit(tenant: TenantRow, defaults: QueueSettings) -> None:
    """Effective settings: the tenant's own, else the queue's default."""
    tenant.weight = tenant.own_weight if tenant.own_weight is not None else defaults.weight
    tenant.max_running = tenant.own_max_running or defaults.max_running
    tenant.rate = tenant.own_rate if tenant.own_rate is not None else defaults.rate


def _full(queue: Row | None) -> bool:
    """Whether a queue row (max_in_flight, in_flight) is at its cap on leased jobs."""
    cap = None if queue is None else queue["max_in_flight"]
    return cap is not None and queue is not None and queue["in_flight"] >= cap
