"""Throttle routing at enqueue: record the enqueue in its (job name, tenant) window, then let the
rules choose the queue, in the enqueue's own transaction (docs/internals/scheduler.md).

The window rows are locked (``FOR UPDATE``) for the rest of the transaction, so concurrent
enqueues of one (job, tenant) record and decide one after the other, as the rules require. They
are locked before any queue lock; maintenance's prune skips locked rows instead of waiting, so
no cycle of waits can form. On the application's own connection (``enqueue_in``) the rows stay
locked until it commits: only enqueues of the same job and tenant wait for that, never workers.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import Row
from fairq.backends.postgres.steps import PgSteps, Sql, run
from fairq.contract import ThrottleWindowsParams
from fairq.job import NewJob
from fairq.policy import throttle

#: How many expired windows one maintenance deletes at most (the rest go next time).
PRUNE_BATCH = 1000


def window_key(name: str, tenant: str) -> bytes:
    """The primary key of a window: a digest, since tenant ids have no length limit."""
    encoded = name.encode("utf-8")
    return hashlib.sha256(len(encoded).to_bytes(8, "big") + encoded + tenant.encode()).digest()


def route(q: Queries, jobs: Sequence[NewJob], now: float) -> PgSteps[list[NewJob]]:
    """The jobs, each in the queue its throttle rules chose; windows recorded, rows locked."""
    routings = [throttle.Routing(job.name, job.tenant, job.queue, job.throttle) for job in jobs]
    queues = yield from count(q, routings, now)
    return [
        job if queue == job.queue else dataclasses.replace(job, queue=queue)
        for job, queue in zip(jobs, queues, strict=True)
    ]


def count(q: Queries, routings: Sequence[throttle.Routing], now: float) -> PgSteps[list[str]]:
    """Record each enqueue in its window and choose its queue, in order; one without rules
    keeps its home queue, recorded nowhere. A job's enqueue (``route``) and ``Backend.route``
    both come here: one window, one rule."""
    pairs = sorted({(r.name, r.tenant) for r in routings if r.rules})
    if not pairs:
        return [routing.home for routing in routings]
    keyed = sorted((window_key(name, tenant), name, tenant) for name, tenant in pairs)
    args = {
        "keys": [key for key, _, _ in keyed],
        "names": [name for _, name, _ in keyed],
        "tenants": [tenant for _, _, tenant in keyed],
    }
    yield Sql(q["throttle_windows_ensure"], args)
    rows = yield Sql(q["throttle_windows_lock"], args)
    windows = {(row["name"], row["tenant"]): list(row["times"]) for row in rows}
    spans: dict[tuple[str, str], float] = {}
    chosen: list[str] = []
    for routing in routings:
        if not routing.rules:
            chosen.append(routing.home)
            continue
        key = (routing.name, routing.tenant)
        span = throttle.window_span(routing.rules)
        kept = [t for t in windows[key] if t >= now - span]
        windows[key] = [*kept, now][-throttle.window_size(routing.rules) :]
        spans[key] = span
        chosen.append(throttle.choose_queue(windows[key], now, routing.rules, routing.home))
    for (name, tenant), span in spans.items():
        times = windows[(name, tenant)]
        yield Sql(
            q["throttle_window_save"],
            {"key": window_key(name, tenant), "times": times, "span": span, "last_at": max(times)},
        )
    return chosen


def one(cur: Cursor[Row], q: Queries, routing: throttle.Routing, now: float) -> str:
    """``Backend.route``: ``count`` at the event's time, as an enqueue with rules records it."""
    if not routing.rules:
        return routing.home
    (row,) = cur.execute(q["event_time"], {"now": now}).fetchall()
    return run(cur, count(q, [routing], float(row["now"])))[0]


def recent(
    cur: Cursor[Row], q: Queries, params: ThrottleWindowsParams
) -> dict[tuple[str, str], list[float]]:
    """Each asked window's times within its span of ``now`` (empty for an unknown window)."""
    keys = [window_key(name, tenant) for name, tenant in params.keys]
    rows = cur.execute(q["throttle_windows_get"], {"keys": keys}).fetchall()
    stored = {(row["name"], row["tenant"]): row for row in rows}
    found: dict[tuple[str, str], list[float]] = {}
    for key in params.keys:
        row = stored.get(key)
        found[key] = (
            [] if row is None else [t for t in row["times"] if t >= params.now - row["span"]]
        )
    return found


def prune(cur: Cursor[Row], q: Queries, now: float) -> int:
    """Delete windows no rule can match any more (bounded work per call)."""
    return cur.execute(q["throttle_windows_prune"], {"now": now, "limit": PRUNE_BATCH}).rowcount
