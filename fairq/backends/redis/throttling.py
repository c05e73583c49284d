"""Throttle rules at enqueue: record each enqueue in its window, then pick the job's queue.

Record + decide is one atomic script (``route.lua``) per home queue, run *before* the jobs
are stored: a window lives in its home queue's Cluster slot (``Layout.window_key``), while a
re-routed job goes to a queue whose keys may live in another slot, so the two cannot share
one script on a Cluster. ``enqueue.lua`` then stores every job in the queue chosen for it.

What this split gives up: the window and the job are two steps. Ids already stored are
refused before anything is recorded (on a single Redis a look in the directory, the same check
as ``enqueue.lua``'s; on a Cluster the ids' claims, directory.py), so the usual DuplicateJob
leaves the windows untouched; only a failure between the two calls (a lost connection, on a
single Redis an id taken by a concurrent enqueue in between) leaves an enqueue counted whose
job was not stored — it errs towards throttling, never towards losing a job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fairq.contract import ThrottleWindowsParams
from fairq.job import NewJob
from fairq.policy import throttle

from . import calls
from .keys import Layout
from .records import num, text
from .scripts import Arg
from .steps import Batch, FCall, RedisSteps

#: ``RedisBackend._run_once``: run(function, queue whose slot keeps the reply, keys, args).
Run = Callable[[str, str, list[str], Sequence[Arg]], Any]


def route(layout: Layout, jobs: Sequence[NewJob], now: str) -> RedisSteps[list[str]]:
    """The queue of each job: its own, or what its throttle rules chose (recorded). ``now``:
    the time argument, as ``RedisBackend._at`` makes it."""
    routings = [throttle.Routing(job.name, job.tenant, job.queue, job.throttle) for job in jobs]
    return count(layout, routings, now)


def refuse_stored(layout: Layout, ids: list[str]) -> RedisSteps[None]:
    """DuplicateJob before a throttle window records anything (enqueue.lua checks again)."""
    (found,) = yield Batch(lambda pipe: pipe.hmget(layout.directory, ids))
    duplicate = [i for i, queue in zip(ids, found, strict=True) if queue is not None]
    if duplicate:
        raise calls.duplicate(duplicate)


def count(layout: Layout, routings: Sequence[throttle.Routing], now: str) -> RedisSteps[list[str]]:
    """Record each enqueue in its window and choose its queue, in order (one route.lua call
    per home queue); one without rules keeps its home queue, recorded nowhere. A job's
    enqueue (``route``) and ``Backend.route`` both come here: one window, one rule."""
    chosen = [routing.home for routing in routings]
    by_home: dict[str, list[int]] = {}
    for at, routing in enumerate(routings):
        if routing.rules:
            by_home.setdefault(routing.home, []).append(at)
    for home, positions in by_home.items():
        keys: dict[str, int] = {}
        args: list[Arg] = [now]
        for at in positions:
            routing = routings[at]
            key = layout.window_key(home, routing.name, routing.tenant)
            args += [
                keys.setdefault(key, len(keys) + 1),
                throttle.window_size(routing.rules),
                num(throttle.window_span(routing.rules)),
                home,
                len(routing.rules),
            ]
            for rule in routing.rules:
                args += [rule.threshold, num(rule.per), rule.queue]
        reply = yield FCall("route", list(keys), args, once=home)
        for at, queue in zip(positions, reply, strict=True):
            chosen[at] = text(queue)
    return chosen


def windows(
    client: Any, layout: Layout, queues: Sequence[str], params: ThrottleWindowsParams
) -> dict[tuple[str, str], list[float]]:
    """Each window's times ``>= now - span`` (span: that of its last routing).

    A window lives under its home queue, which the key does not name, so each known queue
    is looked at (one pipelined LRANGE per queue and key); a missing window is empty.
    """
    keys = list(params.keys)
    pipe = client.pipeline(transaction=not layout.cluster)  # a Cluster's are in several slots
    for name, tenant in keys:
        for queue in queues:
            pipe.lrange(layout.window_key(queue, name, tenant), 0, -1)
    replies = iter(pipe.execute() if keys and queues else [])
    found: dict[tuple[str, str], list[float]] = {}
    for key in keys:
        entries: list[bytes] = []
        for _ in queues:
            reply = next(replies)
            entries = entries or reply
        found[key] = _recent(entries, params.now)
    return found


def _recent(entries: Sequence[bytes], now: float) -> list[float]:
    if not entries:
        return []
    span = float(text(entries[-1]).partition(":")[2])
    times = [float(text(entry).partition(":")[0]) for entry in entries]
    return [t for t in times if t >= now - span]
