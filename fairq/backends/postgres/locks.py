"""The statements every event shares: the queues' locks, the event's time, the wake-ups.

Written as operations (fairq.backends.postgres.steps) so the blocking store and the asyncio
one run the same ones; ``PostgresBackend._lock`` and friends run them on a blocking cursor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from fairq.backends._sql import Queries
from fairq.backends.postgres.steps import PgSteps, Sql


def lock_queues(
    q: Queries, seed: int, queues: Sequence[str], *, exclusive: bool, now: float
) -> PgSteps[float]:
    """Take the queues' locks in key order; returns the event's time once they are held
    (``now`` itself with ``?clock=caller``; functions/clock.sql)."""
    if not queues:
        return (yield from event_time(q, now))
    name = "lock_queues_exclusive" if exclusive else "lock_queues_shared"
    (row,) = yield Sql(q[name], {"names": list(queues), "seed": seed, "now": now})
    return float(row["now"])


def event_time(q: Queries, now: float) -> PgSteps[float]:
    (row,) = yield Sql(q["event_time"], {"now": now})
    return float(row["now"])


def notify(q: Queries, channel: Callable[[str], str], queues: Iterable[str]) -> PgSteps[None]:
    """Wake the workers waiting on ``queues`` (delivered when the transaction commits)."""
    for name in sorted(queues):
        yield Sql(q["notify"], {"channel": channel(name)})
