"""Maintenance's sweep over a queue's due work, under the queues' exclusive locks (backend.py
``maintain``): what the hot paths leave for later because nothing waits on it."""

from __future__ import annotations

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.events import Events
from fairq.backends.postgres.records import JobRow, QueueRow, Row
from fairq.contract import ExpiredLease


def sweep(
    cur: Cursor[Row], q: Queries, events: Events, names: list[str], now: float
) -> tuple[int, list[ExpiredLease]]:
    """Take in the inbox; then per queue promote due scheduled jobs, expire overdue leases,
    and end rate limits that are over."""
    state = cur.execute(q["queues_dispatch_state"], {"names": names, "now": now})
    due = {row["name"]: row for row in state.fetchall()}
    for name in names:
        if name in due and due[name]["inbox_due"]:
            (taken,) = cur.execute(q["take_in"], {"queue": name, "now": now}).fetchall()
            if taken["taken"]:
                events.woken.add(name)
    if any(due[name]["inbox_due"] for name in due):
        state = cur.execute(q["queues_dispatch_state"], {"names": names, "now": now})
        due = {row["name"]: row for row in state.fetchall()}
    promoted = 0
    expired: list[ExpiredLease] = []
    for name in names:
        row = due.get(name)
        if row is None:
            continue
        events.queues[name] = QueueRow.from_row(row)
        if row["promote_due"]:
            for job in cur.execute(q["jobs_due_scheduled"], {"queue": name, "now": now}).fetchall():
                events.promote(JobRow.from_row(job), now)
                promoted += 1
        if row["expire_due"]:
            for job in cur.execute(
                q["jobs_overdue_running"], {"queue": name, "now": now}
            ).fetchall():
                expired.append(events.expire(JobRow.from_row(job), now))
        if row["unlimit_due"]:
            for limited in cur.execute(
                q["tenants_limited_due"], {"queue": name, "now": now}
            ).fetchall():
                if (held := events.find_tenant(limited["id"])) is not None:
                    events.unlimit(held, now)
    return promoted, expired
