"""Queue names nobody knows: neither the App declares them nor the store has seen them.

A queue comes into being with its first job or setting, so a typo (``--queues imprts``,
``fairq tenants imprts 42 --weight 2``) is not an error to any store: the worker serves an
empty queue and the setting lands where no job will read it. The worker and the admin commands
ask here first and say so, naming the queues that are known and the closest one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from fairq.app.app import App
from fairq.contract import GetQueueParams, QueueSettings, StatsParams


def declared(app: App) -> set[str]:
    """Every queue the App's workers may serve: declared ones, its jobs' home queues (throttle
    queues are declared), and each sharded queue's shards."""
    names = {d.queue for d in app.jobs.values()}
    for queue in app.queues.values():
        names.update(queue.served())
    return names


def unseen(app: App, names: Iterable[str], *, store: bool = True) -> list[str]:
    """The ``names`` the App does not declare and the store has no trace of: no tenant row (a
    job, a setting, a count), no settings of its own, no published job type homed there.
    ``store=False``: there is no store yet (a SQLite file not made): the App alone decides."""
    mine = declared(app) | (_published(app) if store else set())
    return [
        name
        for name in dict.fromkeys(names)
        if name not in mine and not (store and _stored(app, name))
    ]


def describe(app: App, names: Iterable[str], *, store: bool = True) -> str:
    """``queue 'x' is not declared by the app and the store has never seen it (known: a, b;
    did you mean 'a'?)`` for each name, joined. Reads every tenant row: for messages only."""
    known = declared(app)
    if store:
        known |= _published(app) | {row.queue for row in app.backend.stats(StatsParams())}
    parts = []
    for name in names:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        parts.append(
            f"queue {name!r} is not declared by the app and the store has never seen it "
            f"(known: {', '.join(sorted(known)) or 'none'}{hint})"
        )
    return "; ".join(parts)


def _published(app: App) -> set[str]:
    return {t.queue for t in app.backend.job_types().values()}


def _stored(app: App, name: str) -> bool:
    backend = app.backend
    if backend.stats(StatsParams(queue=name)):
        return True
    return backend.get_queue(GetQueueParams(queue=name)) != QueueSettings(queue=name)
