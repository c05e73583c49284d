"""``enqueue`` as one operation (fairq.backends.postgres.steps), for the blocking store and the
asyncio one alike: the statements of one transaction, in order, and what their rows mean.

Throttle rules first (their windows' rows are locked before any queue lock: throttling.py),
then the queues' shared locks, the unique keys claimed (a job whose key is held is not
stored: unique.py), the tenants' rows created and locked in id order, the jobs
inserted in one ``executemany``, ids held by succeeded jobs refused, the tenants written back
and the queues' waiting workers woken. Sharded jobs go one after another, so each one's choice
of shard sees those before it (sharding.py); the batch is still one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fairq.backends._sql import Queries
from fairq.backends.postgres import locks, results, sharding, throttling, unique
from fairq.backends.postgres.events import Events
from fairq.backends.postgres.steps import PgSteps, Sql
from fairq.job import NewJob
from fairq.policy.unique import Holder


class Enqueue:
    """The enqueue of one store (schema): its queries, lock seed and wake-up channels."""

    def __init__(self, q: Queries, seed: int, channel: Callable[[str], str]) -> None:
        self.q = q
        self.seed = seed
        self.channel = channel

    def steps(
        self, jobs: Sequence[NewJob], now: float
    ) -> PgSteps[tuple[list[str], dict[int, Holder]]]:
        """Store ``jobs`` (checked: non-empty, distinct ids): the queues of the jobs stored,
        and the jobs whose unique key is held, by position (unique.py)."""
        if not any(job.shards for job in jobs):
            return (yield from self._store(list(jobs), now))
        queues: list[str] = []
        held: dict[int, Holder] = {}
        for i, job in enumerate(jobs):
            placed = yield from sharding.place(self.q, job)
            went, found = yield from self._store([placed], now, given=[job])
            queues += went
            if found:
                held[i] = found[0]
        return queues, held

    def _store(
        self, jobs: list[NewJob], now: float, given: list[NewJob] | None = None
    ) -> PgSteps[tuple[list[str], dict[int, Holder]]]:
        """``given``: the jobs as enqueued, when ``jobs`` are their copies placed in a shard
        (a unique key's scope is the queue named at enqueue)."""
        q = self.q
        if any(job.throttle for job in jobs):  # the windows record the event's time
            now = yield from locks.event_time(q, now)
        jobs = yield from throttling.route(q, jobs, now)
        events = Events(None, q)
        queues = sorted({job.queue for job in jobs})
        now = yield from locks.lock_queues(q, self.seed, queues, exclusive=False, now=now)
        held = yield from unique.claim_steps(q, given or jobs, [job.queue for job in jobs], now)
        if held:
            jobs = [job for i, job in enumerate(jobs) if i not in held]
            if not jobs:
                return [], held
        for name in queues:
            yield Sql(q["queue_ensure"], {"name": name})
        tenants = yield from events.lock_tenants_steps([(job.queue, job.tenant) for job in jobs])
        rows = []
        for job in jobs:
            tenant = tenants[(job.queue, job.tenant)]
            rows.append((yield from events.count_new_steps(job, tenant, now)))
        yield Sql(q["job_insert"], many=rows)
        yield from results.refuse_succeeded(q, [job.id for job in jobs])
        for tenant in tenants.values():
            yield from events.save_steps(None, tenant)
        yield from locks.notify(q, self.channel, events.woken)
        return [job.queue for job in jobs], held
