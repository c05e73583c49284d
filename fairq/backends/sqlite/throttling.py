"""Throttle windows: record an enqueue and choose its queue, inside the enqueue's transaction.

A window is the rows of ``throttle_times`` for one (job name, tenant), in recording order. The
enqueue's ``BEGIN IMMEDIATE`` makes record + decide one atomic step across processes; the
decision itself is ``fairq.policy.throttle``, on the same list of times the reference model
keeps (``ReferenceModel._route``), so both route alike. A window never holds more than its
rules' ``window_size`` rows, and maintenance deletes a window once all its times are older than
its span (a Redis key's TTL, PostgreSQL's ``throttle_windows_prune``).
"""

from __future__ import annotations

import sqlite3

from fairq.backends.sqlite.sql import Q
from fairq.contract import ThrottleWindowsParams
from fairq.job import NewJob
from fairq.policy import throttle


def route(db: sqlite3.Connection, job: NewJob, now: float) -> str:
    """The queue of a job with throttle rules (its enqueue recorded, as ``count``)."""
    return count(db, throttle.Routing(job.name, job.tenant, job.queue, job.throttle), now)


def count(db: sqlite3.Connection, routing: throttle.Routing, now: float) -> str:
    """Record ``now`` in the window, keep what the rules can still count, pick a queue. A
    job's enqueue (``route``) and ``Backend.route`` both come here: one window, one rule."""
    if not routing.rules:
        return routing.home
    key = {"name": routing.name, "tenant": routing.tenant}
    span = throttle.window_span(routing.rules)
    rows = db.execute(Q["throttle_window"], key).fetchall()
    kept = [(row["id"], row["at"]) for row in rows if row["at"] >= now - span]
    kept = kept[1 - throttle.window_size(routing.rules) :]  # room for the new time (size >= 2)
    kept_ids = {row_id for row_id, _ in kept}
    dropped = [{"id": row["id"]} for row in rows if row["id"] not in kept_ids]
    db.executemany(Q["throttle_drop"], dropped)
    db.execute(Q["throttle_record"], {**key, "at": now})
    times = [at for _, at in kept] + [now]
    db.execute(Q["throttle_stamp"], {**key, "span": span, "last_at": max(times)})
    return throttle.choose_queue(times, now, routing.rules, routing.home)


def windows(
    db: sqlite3.Connection, params: ThrottleWindowsParams
) -> dict[tuple[str, str], list[float]]:
    """Each window's times a rule can still count (``at >= now - span``); [] when unknown."""
    found: dict[tuple[str, str], list[float]] = {}
    for name, tenant in params.keys:
        rows = db.execute(Q["throttle_window"], {"name": name, "tenant": tenant}).fetchall()
        found[name, tenant] = [row["at"] for row in rows if row["at"] >= params.now - row["span"]]
    return found
