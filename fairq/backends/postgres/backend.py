"""``PostgresBackend``: the Backend protocol over PostgreSQL.

Each call is one short transaction (fairq/backends/postgres/db.py). The hot paths — enqueue,
dequeue, dispatch, every ack, ack-and-dequeue — are plpgsql functions (functions/*.sql), one
statement and one round trip each; the other events (fail, release, heartbeat, maintenance,
settings, requeue) run in Python on rows the transaction holds (events.py, through
fairq.policy.tenant). Both compute every tag as the same double the reference model does.
queries/locks.sql explains the locks that make concurrent calls behave as some serial order of them
(dispatches of one queue within the bound of docs/internals/scheduler.md, "Parallel
dispatch"); an event's time is the later of the caller's ``now`` and the server's clock once
those locks are held (clock.sql).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

from psycopg import Connection, Cursor

from fairq.backends.postgres import (
    beats,
    cancelling,
    figures,
    history,
    inspect,
    kept,
    locks,
    maintenance,
    pruning,
    results,
    settings,
    slots,
    throttling,
    unique,
)
from fairq.backends.postgres.db import Database, Pool
from fairq.backends.postgres.events import Events
from fairq.backends.postgres.keys import (
    WAKE,
    channel_salt,
    parse_token,
    queue_channel,
    schema_seed,
)
from fairq.backends.postgres.migrate import ensure_schema
from fairq.backends.postgres.producing import Enqueue
from fairq.backends.postgres.records import JobRow, Row
from fairq.backends.postgres.sql import queries_for
from fairq.backends.postgres.steps import PgSteps, Sql, run
from fairq.backends.postgres.transactional import InboxWriter, binding, bound_connection
from fairq.backends.postgres.url import PostgresUrl, parse_url
from fairq.backends.postgres.waiting import Waiter
from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    AcquireSlotParams,
    CancelParams,
    CancelResult,
    CheckpointParams,
    CheckpointResult,
    DequeueParams,
    DequeueResult,
    EnqueueParams,
    EnqueueResult,
    ExpiredLease,
    FailParams,
    FiguresParams,
    GetJobsParams,
    GetQueueParams,
    HeartbeatParams,
    HeartbeatResult,
    HistoryPage,
    HistoryParams,
    JobCost,
    JobCostsParams,
    JobType,
    LeaveLineParams,
    ListDeadParams,
    MaintainParams,
    MaintainResult,
    PublishJobTypesParams,
    QueueSettings,
    ReleaseParams,
    ReleaseSlotsParams,
    ReleaseSlotsResult,
    RenewSlotsParams,
    RenewSlotsResult,
    RequeueParams,
    RouteParams,
    RouteResult,
    SetQueueParams,
    SlotResult,
    StatsParams,
    TenantFigures,
    TenantSettingsParams,
    TenantStats,
    ThrottleWindowsParams,
    WaitParams,
    no_wait,
    waited_first,
)
from fairq.errors import LeaseExpired, LeaseNotFound
from fairq.job import JobInfo, JobState, check_distinct
from fairq.policy.throttle import Routing
from fairq.policy.unique import answer

T = TypeVar("T")
log = logging.getLogger("fairq.backends.postgres")

#: How many times a dequeue that found every eligible tenant held by other dispatches is made
#: again (each after waiting for one of them): beyond, it reports nothing ready.
MISSED_TRIES = 20


class PostgresBackend:
    """Fair per-tenant queues in PostgreSQL (see ``fairq.backends.postgres`` for the URL).

    ``schema``/``migrate`` override the URL's ``?schema=`` and ``?migrate=``. Opening checks the
    schema version, creating or upgrading it when allowed. ``pool``: share a pool (from
    ``fairq.backends.postgres.db.make_pool``) between stores in several schemas of one
    database; it is then the caller's to close.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        migrate: bool | None = None,
        pool: Pool | None = None,
    ) -> None:
        self.url: PostgresUrl = parse_url(url, schema=schema, migrate=migrate)
        self.schema = self.url.schema
        ensure_schema(self.url)
        self.q = queries_for(self.schema)
        self.db = Database(self.url, pool=pool)
        self.seed = schema_seed(self.schema)
        self._waiter = Waiter(self.url, self._channel, self._channel(WAKE))
        #: The enqueue operation (producing.py), which the asyncio store (aio.py) and an
        #: enqueue in the caller's transaction (transactional.py) run too.
        self.enqueueing = Enqueue(self.q, self.schema)
        self._inbox = InboxWriter(self.q, self.enqueueing)

    @classmethod
    def from_url(cls, url: str) -> PostgresBackend:
        return cls(url)

    # -- producing -------------------------------------------------------------------------

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        """A plain batch is one statement, one round trip (functions/enqueue.sql); jobs with
        throttle rules, shards or unique keys do what they need first, in the same transaction
        (producing.py)."""
        jobs = list(params.jobs)
        check_distinct(jobs)
        if not jobs:
            return EnqueueResult(queues=[])
        conn = bound_connection(self)
        if conn is not None:
            return self._inbox.write(conn, jobs, params.now)
        queues, held = self.enqueueing.blocking(self.db, jobs, params.now)
        chosen, existing = answer(len(jobs), held, queues)
        return EnqueueResult(queues=chosen, existing=existing)

    def enqueue_in(self, conn: Connection[Any], params: EnqueueParams) -> list[str]:
        """Enqueue inside the caller's transaction on ``conn``: the jobs exist if and only if
        it commits. A refused enqueue (DuplicateJob) leaves that transaction usable. See
        ``fairq.backends.postgres.transactional`` for how, and why no fairq lock is taken.
        Returns the queue each job went to (for a job whose unique key is held, the queue of
        the job holding it: use ``enqueue`` under ``bound_to`` to learn that job's id)."""
        jobs = list(params.jobs)
        check_distinct(jobs)
        return list(self._inbox.write(conn, jobs, params.now).queues) if jobs else []

    @contextmanager
    def bound_to(self, conn: Connection[Any]) -> Iterator[None]:
        """Inside this block (in this thread or task), every enqueue through this backend,
        ``App.enqueue`` and ``job.enqueue`` included, goes into ``conn``'s transaction."""
        with binding(self, conn):
            yield

    # -- consuming -------------------------------------------------------------------------

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        """One statement when nothing is due (the usual case); else maintenance first.

        The fast path is the server-side ``dequeue`` function in autocommit: locks, the
        "is maintenance due" check and dispatch in one implicit transaction and round trip.
        A call that found every eligible tenant held by another dispatch is made again, each
        time after waiting for the first of them to be let go (functions/dequeue.sql:
        wait_for_held), so a worker never takes "held" for "nothing to do".
        """
        params = waited_first(params, self.wait)
        names = list(dict.fromkeys(params.queues))
        args = {
            "queues": names,
            "seed": self.seed,
            "worker": params.worker_id,
            "now": params.now,
            "limit": max(params.limit, 0),
            "hold": params.hold,
        }
        return self._dispatched(names, args, wait=False)

    def _dispatched(
        self, names: list[str], args: dict[str, object], *, wait: bool
    ) -> DequeueResult:
        for _ in range(MISSED_TRIES):
            rows = self.db.run_one(self.q["dequeue"], {**args, "wait": wait})
            expired: list[ExpiredLease] = []
            if rows and rows[0]["due"]:
                expired, rows = self.db.run(lambda cur: self._dequeue(cur, names, args))
            leases = [results.lease(row) for row in rows if row["l_id"] is not None]
            if leases or expired or not results.missed(rows):
                return DequeueResult(leases=leases, expired=expired)
            wait = True
        return DequeueResult(leases=[], expired=[])

    def _dequeue(
        self, cur: Cursor[Row], names: list[str], args: dict[str, object]
    ) -> tuple[list[ExpiredLease], list[Row]]:
        now = args["now"]
        assert isinstance(now, float | int)
        args = {**args, "now": self._lock(cur, names, exclusive=True, now=float(now))}
        return self._maintain_and_dispatch(cur, names, args)

    def _maintain_and_dispatch(
        self, cur: Cursor[Row], names: list[str], args: dict[str, object]
    ) -> tuple[list[ExpiredLease], list[Row]]:
        """A dequeue's slow path, under the queues' exclusive locks: maintenance, then
        dispatch, in the caller's transaction."""
        events = Events(cur, self.q)
        now = args["now"]
        assert isinstance(now, float | int)
        _, expired = maintenance.sweep(cur, self.q, events, names, float(now))
        figures.write(cur, self.q, events.figures, float(now))
        self._notify(cur, events.woken)
        return expired, cur.execute(self.q["dispatch"], args).fetchall()

    def ack_and_dequeue(self, both: AckAndDequeueParams) -> AckAndDequeueResult:
        """One statement when no maintenance is due: the server-side ``ack_dequeue``
        (functions/dequeue.sql), one round trip and one commit for both calls.

        When maintenance is due that statement changes nothing; then one explicit transaction
        takes the same locks, acks, maintains and dispatches, as ``dequeue``'s slow path does.
        Retried like ``ack_many`` and ``dequeue`` when the connection was lost before the reply.
        """
        acks, params = both.acks, both.dequeue
        no_wait(params)
        names = list(dict.fromkeys(params.queues))
        parsed, args = self._ack_args(acks)
        args |= {
            "ack_now": args.pop("now"),
            "queues": names,
            "worker": params.worker_id,
            "now": params.now,
            "limit": max(params.limit, 0),
            "hold": params.hold,
        }
        # results to keep (kept.py): the explicit transaction, as when maintenance is due
        rows: list[Row] = [{"due": True}]
        if not acks.results:
            rows = self.db.run_one(self.q["ack_and_dequeue"], args)
        expired: list[ExpiredLease] = []
        if rows[0]["due"]:
            statuses, expired, rows = self.db.run(
                lambda cur: self._ack_and_dequeue(cur, names, args, acks, parsed)
            )
        else:
            statuses, rows = list(rows[0]["statuses"]), rows[1:]
        leases = [results.lease(row) for row in rows if row["l_id"] is not None]
        dequeued = DequeueResult(leases=leases, expired=expired)
        if not leases and not expired and results.missed(rows):
            dequeued = self._dispatched(names, args, wait=True)
        return AckAndDequeueResult(
            acks=results.ack_result(acks.tokens, parsed, statuses), dequeue=dequeued
        )

    def _ack_and_dequeue(
        self,
        cur: Cursor[Row],
        names: list[str],
        args: dict[str, object],
        acks: AckManyParams,
        parsed: list[results.Parsed],
    ) -> tuple[list[str], list[ExpiredLease], list[Row]]:
        """The slow path of ``ack_and_dequeue``: locks (exclusive and shared in one pass, in
        key order), ``ack_many`` (which finds its locks held) keeping results, maintenance,
        dispatch."""
        cur.execute(self.q["lock_ack_dequeue"], args)
        (row,) = cur.execute(self.q["ack_many"], {**args, "now": args["ack_now"]}).fetchall()
        kept.keep(cur, self.q, acks.tokens, parsed, row["statuses"], acks.results)
        now = args["now"]
        assert isinstance(now, float | int)
        args = {**args, "now": self._event_time(cur, float(now))}
        return list(row["statuses"]), *self._maintain_and_dispatch(cur, names, args)

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        """One statement: the server-side ``ack_many`` function (functions/acks.sql).

        Retried like ``ack`` when the connection was lost before the reply: a batch that had
        committed then reports its tokens lost (their jobs are already succeeded).
        """
        parsed, args = self._ack_args(params)
        statuses: list[str] = []
        if args["ids"] and params.results:
            keep = params.tokens, parsed, params.results
            statuses = self.db.run(lambda cur: kept.ack_keeping(cur, self.q, args, *keep))
        elif args["ids"]:
            (row,) = self.db.run_one(self.q["ack_many"], args)
            statuses = list(row["statuses"])
        return results.ack_result(params.tokens, parsed, statuses)

    def _ack_args(self, params: AckManyParams) -> tuple[list[results.Parsed], dict[str, Any]]:
        """The tokens parsed, and ack_many's arguments for those that parse (the others are
        never sent: they are not found)."""
        parsed = [parse_token(token) for token in params.tokens]
        sent = [found for found in parsed if found is not None]
        args = {
            "ids": [found[0] for found in sent],
            "leases": [found[1] for found in sent],
            "now": params.now,
            "seed": self.seed,
            "salt": channel_salt(self.schema),
        }
        return parsed, args

    def fail(self, params: FailParams) -> JobInfo:
        def end(events: Events, job: JobRow, now: float) -> None:
            events.fail(job, now, params.error, params.retry_at)

        return self._end(params.token, params.now, end).info()

    def release(self, params: ReleaseParams) -> None:
        self._end(
            params.token, params.now, lambda ev, job, now: ev.release(job, replace(params, now=now))
        )

    def _end(
        self, token: str, now: float, apply: Callable[[Events, JobRow, float], None]
    ) -> JobRow:
        def work(cur: Cursor[Row]) -> JobRow:
            job, at = self._held(cur, token, now)
            events = Events(cur, self.q)
            apply(events, job, at)
            figures.write(cur, self.q, events.figures, at)
            self._notify(cur, events.woken)
            return job

        return self.db.run(work)

    def _held(self, cur: Cursor[Row], token: str, now: float) -> tuple[JobRow, float]:
        """The running job a token names, locked, under its shared queue lock, and the event's
        time once they are held; or raise."""
        parsed = parse_token(token)
        row = None
        if parsed is not None:
            found = cur.execute(self.q["job_queue"], {"id": parsed[0]}).fetchone()
            if found is not None:
                self._lock(cur, [found["queue"]], exclusive=False, now=now)
                row = cur.execute(self.q["job_lock_by_id"], {"id": parsed[0]}).fetchone()
                now = self._event_time(cur, now)
        job = None if row is None else JobRow.from_row(row)
        if (
            parsed is None
            or job is None
            or job.state is not JobState.RUNNING
            or job.leases != parsed[1]
        ):
            raise LeaseNotFound.of(token)
        assert job.deadline is not None
        if now >= job.deadline:
            raise LeaseExpired.of(token, job.deadline, now)
        return job, now

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        """Charge each held job's run so far to its tenant and extend its lease; or claim
        relayed jobs, or hold them for the relay (beats.py)."""
        return self.db.run(
            lambda cur: beats.heartbeat(cur, self.q, self._shared, self._event_time, params)
        )

    def checkpoint(self, params: CheckpointParams) -> CheckpointResult:
        """A heartbeat of one lease that also stores its job's progress (locks as ``_held``)."""

        def work(cur: Cursor[Row]) -> CheckpointResult:
            job, now = self._held(cur, params.token, params.now)
            cur.execute(self.q["job_checkpoint"], {"seq": job.seq, "progress": params.progress})
            return CheckpointResult(deadline=Events(cur, self.q).heartbeat(job, now))

        return self.db.run(work)

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        return self.db.run(lambda cur: throttling.recent(cur, self.q, params))

    # -- routing and tenant slots (for peer brokers' jobs): throttling.py, slots.py --------

    def route(self, params: RouteParams) -> RouteResult:
        routed = Routing(params.name, params.tenant, params.queue, params.rules)
        return RouteResult(
            queue=self.db.run(lambda cur: throttling.one(cur, self.q, routed, params.now))
        )

    def acquire_slot(self, params: AcquireSlotParams) -> SlotResult:
        return self.db.run(lambda cur: slots.acquire(cur, self.q, self.seed, params))

    def renew_slots(self, p: RenewSlotsParams) -> RenewSlotsResult:
        return self.db.run(lambda cur: slots.renew(cur, self.q, self.seed, p.tokens, p.now))

    def release_slots(self, p: ReleaseSlotsParams) -> ReleaseSlotsResult:
        return self.db.run(lambda cur: slots.release(cur, self.q, self.seed, p.tokens, p.now))

    def leave_line(self, params: LeaveLineParams) -> bool:
        return self.db.run(lambda cur: slots.leave(cur, self.q, self.seed, params))

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self, params: MaintainParams) -> MaintainResult:
        def work(cur: Cursor[Row]) -> MaintainResult:
            if params.queues is None:
                names = inspect.queue_names(cur, self.q)
            else:
                names = list(dict.fromkeys(params.queues))
            now = self._lock(cur, names, exclusive=True, now=params.now)
            events = Events(cur, self.q)
            promoted, expired = maintenance.sweep(cur, self.q, events, names, now)
            pruned = 0
            if params.retention is not None:
                pruned = pruning.prune(cur, self.q, now - params.retention, now)
            throttling.prune(cur, self.q, now)
            slots.prune(cur, self.q, now)
            unique.prune(cur, self.q, now)
            figures.write(cur, self.q, events.figures, now)
            figures.prune(cur, self.q, now)
            self._notify(cur, events.woken)
            return MaintainResult(
                promoted=promoted,
                expired=expired,
                pruned=pruned,
                next_due=inspect.next_due(cur, self.q, names),
            )

        return self.db.run(work)

    # -- settings --------------------------------------------------------------------------

    def set_queue(self, params: SetQueueParams) -> None:
        """Store the defaults and resettle the queue's tenants (settings.py). A capped queue's
        count in flight is counted again from its running jobs."""

        def work(cur: Cursor[Row]) -> None:
            now = self._lock(cur, [params.settings.queue], exclusive=True, now=params.now)
            self._notify(cur, settings.store_queue(cur, self.q, params, now))

        self.db.run(work)

    def get_queue(self, params: GetQueueParams) -> QueueSettings:
        return self.db.run(lambda cur: inspect.queue_settings(cur, self.q, params.queue))

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return self.db.run(lambda cur: run(cur, self.set_tenant_steps(params)))

    def set_tenant_steps(self, params: TenantSettingsParams) -> PgSteps[TenantStats]:
        """The tenant's own settings stored, its effective ones and eligibility recomputed,
        under the queue's shared lock and the tenant row's (the asyncio store runs it too)."""
        q, pair = self.q, (params.queue, params.tenant)
        now = yield from locks.lock_queues(q, self.seed, [params.queue], exclusive=False,
                                           now=params.now)  # fmt: skip
        yield Sql(q["queue_ensure"], {"name": params.queue})
        defaults = yield from inspect.queue_settings_steps(q, params.queue)
        events = Events(None, q)
        tenant = (yield from events.lock_tenants_steps([pair]))[pair]
        params.apply_to(tenant)
        settings.inherit(tenant, defaults)
        yield from events.resettle_steps(tenant, now)
        yield from locks.notify(q, self._channel, events.woken)
        asked = StatsParams(queue=params.queue, tenant=params.tenant, now=now)
        (stats,) = yield from inspect.stats_steps(q, asked)
        return stats

    def publish_job_types(self, params: PublishJobTypesParams) -> None:
        self.db.run(lambda cur: inspect.publish_job_types(cur, self.q, params.types))

    def job_types(self) -> dict[str, JobType]:
        return self.db.run(lambda cur: inspect.job_types(cur, self.q))

    # -- inspection ------------------------------------------------------------------------

    def stats(self, params: StatsParams) -> list[TenantStats]:
        return self.db.run(lambda cur: inspect.stats(cur, self.q, params))

    def figures(self, params: FiguresParams) -> list[TenantFigures]:
        return self.db.run(lambda cur: figures.read(cur, self.q, params))

    def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return self.db.run(lambda cur: inspect.get_jobs(cur, self.q, params.ids))

    def job_costs(self, params: JobCostsParams) -> list[JobCost]:
        return self.db.run(lambda cur: inspect.job_costs(cur, self.q, params.queue))

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        return self.db.run(lambda cur: inspect.list_dead(cur, self.q, params))

    def history(self, params: HistoryParams) -> HistoryPage:
        return history.read(self.db, self.schema, params)

    def cancel(self, params: CancelParams) -> CancelResult:
        """cancelling.py: under the jobs' queues' exclusive locks."""
        return CancelResult(
            outcomes=self.db.run(
                lambda cur: cancelling.cancel(cur, self.q, self._exclusive, params.ids, params.now)
            )
        )

    def requeue(self, params: RequeueParams) -> int:
        def work(cur: Cursor[Row]) -> int:
            queues = sorted({job.queue for job in inspect.job_rows(cur, self.q, params.ids)})
            now = self._lock(cur, queues, exclusive=False, now=params.now)
            events = Events(cur, self.q)
            count = events.requeue_dead(params.ids, now)
            self._notify(cur, events.woken)
            return count

        return self.db.run(work)

    # -- waiting ---------------------------------------------------------------------------

    def wait(self, params: WaitParams) -> None:
        self._waiter.wait(params.queues, params.timeout)

    def close(self) -> None:
        def wake(channel: str) -> None:
            self.db.run(lambda cur: cur.execute(self.q["notify"], {"channel": channel}))

        self._waiter.close(wake)
        self.db.close()

    # -- shared steps ----------------------------------------------------------------------

    def _lock(
        self, cur: Cursor[Row], queues: Sequence[str], *, exclusive: bool, now: float
    ) -> float:
        """Take the queues' locks in key order (locks.py); the event's time once held."""
        return run(cur, locks.lock_queues(self.q, self.seed, queues, exclusive=exclusive, now=now))

    def _shared(self, cur: Cursor[Row], queues: Sequence[str], now: float) -> float:
        return self._lock(cur, queues, exclusive=False, now=now)

    def _exclusive(self, cur: Cursor[Row], queues: Sequence[str], now: float) -> float:
        return self._lock(cur, queues, exclusive=True, now=now)

    def _event_time(self, cur: Cursor[Row], now: float) -> float:
        return run(cur, locks.event_time(self.q, now))

    def _channel(self, queue: str) -> str:
        return queue_channel(self.schema, queue)

    @property
    def wake_channel(self) -> str:
        return self._channel(WAKE)

    def _notify(self, cur: Cursor[Row], queues: set[str]) -> None:
        run(cur, locks.notify(self.q, self._channel, queues))
