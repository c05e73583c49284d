"""A queue's defaults and a tenant's own settings: stored, then every tenant they affect
resettled (effective settings, rate hold and eligibility), in the caller's write transaction."""

from __future__ import annotations

import sqlite3

from fairq.backends.sqlite.events import resettle
from fairq.backends.sqlite.inspect import stats_of
from fairq.backends.sqlite.producing import tenant_id
from fairq.backends.sqlite.records import QueueRow, TenantRow, rate_columns
from fairq.backends.sqlite.sql import Q
from fairq.contract import QueueSettings, SetQueueParams, TenantSettingsParams, TenantStats


def set_queue(db: sqlite3.Connection, params: SetQueueParams) -> None:
    """Store the defaults and resettle every tenant of the queue (one loop): effective
    settings, rate hold and eligibility may all change, even for tenants with their own.
    The settings ``params`` keeps are read in the same transaction."""
    settings = params.apply_to(get_queue(db, params.settings.queue))
    db.execute(
        Q["queue_set_defaults"],
        {
            "name": settings.queue,
            "weight": settings.weight,
            "max_running": settings.max_running,
            **rate_columns(settings.rate, "rate_"),
            "half_life": settings.half_life,
            "max_debt": settings.max_debt,
            "max_in_flight": settings.max_in_flight,
        },
    )
    queue = QueueRow.get(db, settings.queue)
    for row in db.execute(Q["tenants_of_queue"], {"queue": settings.queue}).fetchall():
        tenant = TenantRow.load(db, row["id"])
        resettle(tenant, queue, params.now)
        tenant.save(db)


def get_queue(db: sqlite3.Connection, name: str) -> QueueSettings:
    queue = QueueRow.load(db, name)
    if queue is None:
        return QueueSettings(queue=name)
    return QueueSettings(
        queue=name,
        weight=queue.weight,
        max_running=queue.max_running,
        rate=queue.rate,
        half_life=queue.half_life,
        max_debt=queue.max_debt,
        max_in_flight=queue.max_in_flight,
    )


def set_tenant(db: sqlite3.Connection, params: TenantSettingsParams) -> TenantStats:
    db.execute(Q["queue_ensure"], {"name": params.queue})
    tenant = TenantRow.load(db, tenant_id(db, params.queue, params.tenant))
    params.apply_to(tenant)
    queue = QueueRow.get(db, params.queue)
    resettle(tenant, queue, params.now)
    tenant.save(db)
    return stats_of(db, tenant, queue, params.now)
