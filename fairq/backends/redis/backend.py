"""``RedisBackend``: every state change is one Lua function (FCALL); reads are plain commands.

Python validates input, finds the queue of a lease token (job ids map to their queue in the
directory hash; a job never changes queue once stored), packs KEYS and ARGV, and turns script
replies into records or errors. It never reads state to decide what to write: that happens
inside the scripts, atomically. See keys.py for the layout and lua/_lib.lua for the stored
records. Enqueueing jobs with throttle rules is the one operation in two scripts: the
window's record + decide (route.lua, in the home queue's Cluster slot), then the store
(enqueue.lua, in the chosen queue's); throttling.py says why and what that gives up.
Every call whose re-sending by redis-py would change the outcome is sent once (``_run_once``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from fairq.backends.clock import Clock
from fairq.backends.steps import drive
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
    FailParams,
    GetJobsParams,
    GetQueueParams,
    HeartbeatParams,
    HeartbeatResult,
    JobType,
    Keep,
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
    TenantSettingsParams,
    TenantStats,
    ThrottleWindowsParams,
    WaitParams,
    no_wait,
)
from fairq.errors import (
    LeaseExpired,
    LeaseNotFound,
)
from fairq.figures import FiguresParams, TenantFigures
from fairq.job import JobInfo, Lease
from fairq.policy.throttle import Routing
from fairq.results import JobResult

from . import calls, figures, reads, slots, throttling
from .checks import check_types, types_checked
from .connection import (
    RedisOptions,
    check_eviction,
    check_version,
    open_client,
    parse_url,
    translated,
)
from .keys import Layout
from .records import (
    JobRecord,
    QueueDefaults,
    TenantRecord,
    job_info,
    lease,
    num,
    oldest_ready_at,
    rate_arg,
    rate_from,
    text,
)
from .requests import Batch, FCall, RedisSteps, Request, once_args, run_batch
from .scripts import Arg, library
from .waiting import SLICE, Waiter

T = TypeVar("T")
ROUTE_CACHE = 100_000


class RedisBackend:
    """Fair per-tenant queues in Redis (``redis://``, ``rediss://`` or ``unix://`` URLs).

    URL options: ``prefix`` (key prefix, default ``fairq``), ``max_payload_bytes`` and
    ``clock`` (``store``, the default, or ``caller``: fairq/backends/clock.py).
    """

    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self.layout = Layout(options.prefix)
        self.client: Any = open_client(options)  # replies are parsed where they are used
        self._library = library()
        self._checked: set[str] = set()
        self._homes: set[str] = set()  # queues route() has added to the queues seen
        self._routes: OrderedDict[str, str] = OrderedDict()
        self.caller = os.urandom(6).hex()  # with the thread's id: whose reply key (_once)
        self._lock = threading.Lock()
        try:
            with self._translated():
                info = self.client.info("server", "memory")
                check_version(text(info["redis_version"]))
                policy, limit = text(info.get("maxmemory_policy", "")), info.get("maxmemory", 0)
                check_eviction(self.options.safe_url, policy, int(limit))
                check_types(self.client, self.options.safe_url, self.layout.global_types())
        except BaseException:
            self.client.close()
            raise
        self._waiter = Waiter(options, self.layout)

    @classmethod
    def from_url(cls, url: str) -> RedisBackend:
        return cls(parse_url(url))

    # -- producing -------------------------------------------------------------------------

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        return self._drive(self.enqueue_steps(params))

    def enqueue_steps(self, params: EnqueueParams) -> RedisSteps[EnqueueResult]:
        """Route jobs with throttle rules (throttling.py: its own script, in the home queue's
        slot), then store every job in its queue with one enqueue.lua call."""
        jobs = list(params.jobs)
        if not jobs:
            return EnqueueResult(queues=[])
        calls.check_jobs(jobs, self.options.max_payload_bytes)
        queues = [job.queue for job in jobs]
        if any(job.throttle for job in jobs):
            # a job with a unique key is never throttled, and its id is checked only if stored
            unkeyed = [job.id for job in jobs if job.unique is None]
            yield from throttling.refuse_stored(self.layout, unkeyed)
            queues = yield from throttling.route(self.layout, jobs, self._at(params.now))
        blocks = calls.blocks([q for job, queue in zip(jobs, queues, strict=True)
                               for q in (job.shards or (queue,))])  # fmt: skip
        args: list[Arg] = [self._at(params.now), len(blocks), *blocks, len(jobs)]
        for job, queue in zip(jobs, queues, strict=True):
            args += calls.job_args(calls.block_of(blocks, job, queue), job)
        keys = [self.layout.directory, self.layout.seq, self.layout.queues]
        keys += yield from self._keys_steps(blocks, params.now)
        unique_keys, unique_args = calls.unique_args(self.layout, jobs)
        reply = yield FCall("enqueue", keys + unique_keys, args + unique_args, once=queues[0])
        if reply and text(reply[0]) == "dup":
            raise calls.duplicate([text(i) for i in reply[1:]])
        if reply:  # a sharded job's queue is the script's choice; a held key's job is another
            return calls.enqueued(list(blocks), len(jobs), reply)
        return EnqueueResult(queues=queues)

    # -- consuming -------------------------------------------------------------------------

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        if params.limit < 1 or not params.queues:
            return DequeueResult()
        blocks = calls.blocks(params.queues)
        order = list(blocks.values())  # a queue named twice is tried once: same result
        rest: list[Arg] = [params.limit, params.worker_id, *order]
        if params.wait > 0:
            reply = self._dequeue_after_wait(params, blocks, rest)
        else:
            at = self._at(params.now)
            keys = self._keys(blocks, params.now)
            reply = self._run_once("dequeue", params.queues[0], keys, [at, *rest])
        return self._dequeued(blocks, reply)

    def _dequeued(self, blocks: dict[str, int], reply: list[Any]) -> DequeueResult:
        """A dequeue's reply (dequeue.lua): the leases expired, then the leases handed out,
        their routes remembered."""
        names = {block: name for name, block in blocks.items()}
        return DequeueResult(
            leases=self._leases(names, reply), expired=calls.expired(names, reply[0])
        )

    def _leases(self, names: dict[int, str], reply: list[Any]) -> list[Lease]:
        leases: list[Lease] = []
        for at in range(1, len(reply), 5):
            block, job_id, raw, body, tenant = reply[at : at + 5]
            queue = names[int(block)]
            leases.append(lease(text(job_id), queue, raw, body, text(tenant)))
        for item in leases:
            self._remember(item.job_id, item.queue)
        return leases

    def _dequeue_after_wait(
        self, params: DequeueParams, blocks: dict[str, int], rest: list[Arg]
    ) -> Any:
        """BLPOP slices, each with the dequeue pipelined behind it (at the later of the sender's
        and the server's clock: ``now_of`` in _lib.lua), until a token wakes us, a job is
        taken or the wait is over."""
        started = time.monotonic()
        while True:
            waited = time.monotonic() - started
            at = ">" + num(params.now + waited)
            keys = self._keys(blocks, params.now + waited)  # figures: the slot it runs in
            sent, args = self._once(params.queues[0], keys, [at, *rest])
            with self._translated():
                woke, reply = self._waiter.wait_then(
                    params.queues,
                    params.wait - waited,
                    partial(self._library.pipe, op="dequeue", keys=sent, args=args),
                )
                reply = self._library.answer(self.client, reply, "dequeue", sent, args)
            if woke or len(reply) > 1 or params.wait - waited <= SLICE:
                return reply

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        """One script (ack_many.lua) for every token, with a key block per queue involved."""
        answers = self._per_lease("ack_many", params.tokens, params.now, params.results)
        return calls.ack_result(answers)

    def ack_and_dequeue(self, both: AckAndDequeueParams) -> AckAndDequeueResult:
        """One script (ack_dequeue.lua): the acks' queues join the dequeue's key blocks."""
        acks, params = both.acks, both.dequeue
        no_wait(params)
        if params.limit < 1 or not params.queues:
            return AckAndDequeueResult(acks=self.ack_many(acks), dequeue=DequeueResult())
        routed = self._routed(acks.tokens)
        blocks = calls.blocks([*params.queues, *(q for _, q, _, _ in routed if q is not None)])
        order = list(dict.fromkeys(blocks[q] for q in params.queues))
        args: list[Arg] = [self._at(params.now), params.limit, params.worker_id, len(order)]
        args += [*order, self._at(acks.now), *calls.result_args(routed, acks.results)]
        args += calls.held_args(routed, blocks)
        reply = self._run_once(
            "ack_dequeue", params.queues[0], self._keys(blocks, params.now), args
        )
        answers = calls.answers(routed, reply[0])
        answers = self._rerouted("ack_many", routed, answers, acks.now, acks.results)
        return AckAndDequeueResult(
            acks=calls.ack_result(answers), dequeue=self._dequeued(blocks, reply[1:])
        )

    def fail(self, params: FailParams) -> JobInfo:
        queue, job_id, attempt = self._route(params.token)
        retry = "" if params.retry_at is None else num(params.retry_at)
        args: list[Arg] = [job_id, attempt, self._at(params.now), params.error, retry]
        reply = self._end("fail", queue, args, params.token, params.now)
        record = JobRecord.parse(reply[1])
        assert queue is not None  # _end raised otherwise
        info = job_info(job_id, queue, record, reply[2], text(reply[3]), text(reply[4]))
        return reads.with_progress(info, reply[5] or None)

    def release(self, params: ReleaseParams) -> None:
        queue, job_id, attempt = self._route(params.token)
        run_at = "" if params.run_at is None else num(params.run_at)
        args: list[Arg] = [job_id, attempt, self._at(params.now), run_at]
        if params.note is not None:
            args.append(params.note)
        self._end("release", queue, args, params.token, params.now)

    def checkpoint(self, params: CheckpointParams) -> CheckpointResult:
        queue, job_id, attempt = self._route(params.token)
        args: list[Arg] = [job_id, attempt, self._at(params.now), params.progress]
        reply = self._end("checkpoint", queue, args, params.token, params.now)
        return CheckpointResult(deadline=float(reply[1]))

    def _end(
        self, name: str, queue: str | None, args: list[Arg], token: str, now: float
    ) -> list[Any]:
        if queue is None:
            raise LeaseNotFound.of(token)
        reply: list[Any] = self._run_once(name, queue, self._keys({queue: 1}, now), args)
        if text(reply[0]) == "nf" and self._forget(str(args[0]), queue):
            return self._end(name, self._route(token)[0], args, token, now)
        status = text(reply[0])
        if status == "nf":
            raise LeaseNotFound.of(token)
        if status == "exp":
            raise LeaseExpired.of(token, float(reply[1]), now)
        return reply

    def _forget(self, job_id: str, queue: str) -> bool:
        """Drop a cached route that proved wrong (an id reused after pruning); True if so."""
        with self._lock:
            cached = self._routes.pop(job_id, None)
        if cached is None:
            return False
        with self._translated():
            found = self.client.hget(self.layout.directory, job_id)
        return found is not None and text(found) != queue

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        return calls.heartbeat_result(self._per_lease("heartbeat", params.tokens, params.now))

    def _per_lease(
        self,
        script: str,
        tokens: Sequence[str],
        now: float,
        results: Mapping[str, JobResult] | None = None,
    ) -> list[tuple[str, str]]:
        """Run a per-lease script (``each_held`` in _lib_jobs.lua) over ``tokens`` in one call:
        each token's answer, '' for a lost lease (one whose job is not routed counts too).
        ``results``: ack_many.lua's (``calls.result_args``)."""
        routed = self._routed(tokens)
        blocks = calls.blocks([q for _, q, _, _ in routed if q is not None])
        if not blocks:
            return calls.answers(routed, [])
        extra = [] if results is None else calls.result_args(routed, results)
        args = [self._at(now), *extra, *calls.held_args(routed, blocks)]
        reply = self._run_once(script, next(iter(blocks)), self._keys(blocks, now), args)
        return self._rerouted(script, routed, calls.answers(routed, reply), now, results)

    def _rerouted(
        self,
        script: str,
        routed: list[calls.Routed],
        answers: list[tuple[str, str]],
        now: float,
        results: Mapping[str, JobResult] | None = None,
    ) -> list[tuple[str, str]]:
        """``answers`` with the lost tokens whose cached route proved wrong (an id reused
        after pruning, now in another queue) run again through ``script`` in their queue."""
        stale = [
            token
            for (token, answer), (_, queue, job_id, _) in zip(answers, routed, strict=True)
            if not answer and queue is not None and self._forget(job_id, queue)
        ]
        if not stale:
            return answers
        again = dict(self._per_lease(script, stale, now, results))
        return [(token, again.get(token, answer)) for token, answer in answers]

    # -- routing and tenant slots (for peer brokers' jobs) -----------------------------------

    def route(self, params: RouteParams) -> RouteResult:
        """route.lua, as an enqueue's throttle rules run it (throttling.count). The home queue
        joins the queues seen (once per backend object), where ``throttle_windows`` looks."""
        routing = Routing(params.name, params.tenant, params.queue, params.rules)
        if params.rules and params.queue not in self._homes:
            with self._translated():
                self.client.sadd(self.layout.queues, params.queue)
            self._homes.add(params.queue)
        at = self._at(params.now)
        (queue,) = self._drive(throttling.count(self.layout, [routing], at))
        return RouteResult(queue=queue)

    def acquire_slot(self, params: AcquireSlotParams) -> SlotResult:
        block = self._keys({params.queue: 1}, params.now)
        return slots.acquire(self._run_once, block, self.layout, params, self._at(params.now))

    def renew_slots(self, params: RenewSlotsParams) -> RenewSlotsResult:
        answers = slots.each(
            self._run_once, self.layout, "renew_slots", params.tokens, self._at(params.now)
        )
        pairs = list(zip(params.tokens, answers, strict=True))
        return RenewSlotsResult(
            deadlines={token: float(answer) for token, answer in pairs if answer},
            lost=[token for token, answer in pairs if not answer],
        )

    def release_slots(self, params: ReleaseSlotsParams) -> ReleaseSlotsResult:
        answers = slots.each(
            self._run_once, self.layout, "release_slots", params.tokens, self._at(params.now)
        )
        pairs = list(zip(params.tokens, answers, strict=True))
        return ReleaseSlotsResult(
            released=[token for token, answer in pairs if answer],
            lost=[token for token, answer in pairs if not answer],
        )

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self, params: MaintainParams) -> MaintainResult:
        with self._translated():
            known = reads.queue_names(self.client, self.layout)
        asked = known if params.queues is None else list(dict.fromkeys(params.queues))
        pruned_only = [q for q in known if q not in asked] if params.retention is not None else []
        blocks = calls.blocks([*asked, *pruned_only])
        retention = "" if params.retention is None else num(params.retention)
        args: list[Arg] = [self._at(params.now), retention, len(asked)]
        reply = self._run(
            "maintain", [self.layout.directory, *self._keys(blocks, params.now)], args
        )
        due = text(reply[2])
        return MaintainResult(
            promoted=int(reply[0]),
            expired=calls.expired({block: name for name, block in blocks.items()}, reply[3]),
            pruned=int(reply[1]),
            next_due=float(due) if due else None,
        )

    # -- settings --------------------------------------------------------------------------

    def set_queue(self, params: SetQueueParams) -> None:
        self._drive(self.set_queue_steps(params))

    def set_queue_steps(self, params: SetQueueParams) -> RedisSteps[None]:
        settings = params.settings
        cap = "" if settings.max_running is None else str(settings.max_running)
        rate = rate_arg(settings.rate).split(",") if settings.rate else ["", "", ""]
        half_life = "" if settings.half_life is None else num(settings.half_life)
        in_flight = "" if settings.max_in_flight is None else str(settings.max_in_flight)
        block = yield from self._keys_steps({settings.queue: 1}, params.now)
        args: list[Arg] = [settings.queue, num(settings.weight), cap, *rate, half_life]
        args += [num(settings.max_debt), self._at(params.now), in_flight]
        yield FCall("set_queue", [self.layout.queues, *block], args)

    def get_queue(self, params: GetQueueParams) -> QueueSettings:
        with self._translated():
            return reads.get_queue(self.client, self.layout, params.queue)

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return self._drive(self.set_tenant_steps(params))

    def set_tenant_steps(self, params: TenantSettingsParams) -> RedisSteps[TenantStats]:
        keys = [self.layout.queues, *(yield from self._keys_steps({params.queue: 1}, params.now))]
        args: list[Arg] = [
            params.queue,
            params.tenant,
            calls.setting(params.weight, num),
            calls.setting(params.max_running, str),
            "keep" if isinstance(params.rate, Keep) else rate_arg(params.rate),
            self._at(params.now),
        ]
        raw, oldest, *meta = yield FCall("set_tenant", keys, args)
        weight, cap, rate, half_life, max_debt, now = (text(v) for v in meta)
        defaults = QueueDefaults(
            weight=float(weight),
            cap=int(cap) if cap else None,
            rate=rate_from(*rate.split(",")) if rate else None,
            half_life=float(half_life) if half_life else None,
            max_debt=float(max_debt),
        )
        oldest_at = oldest_ready_at(oldest or None)
        return TenantRecord.parse(raw).stats(
            params.queue, params.tenant, defaults, oldest_at, float(now)
        )

    def publish_job_types(self, params: PublishJobTypesParams) -> None:
        types = params.types
        if types:
            mapping = {t.name: reads.job_type_json(t) for t in types}
            with self._translated():
                self.client.hset(self.layout.types, mapping=mapping)

    def job_types(self) -> dict[str, JobType]:
        return self._drive(reads.job_types(self.layout))

    # -- inspection ------------------------------------------------------------------------

    def stats(self, params: StatsParams) -> list[TenantStats]:
        return self._drive(reads.stats(self.layout, params))

    def figures(self, params: FiguresParams) -> list[TenantFigures]:
        with self._translated():
            return figures.read(self.client, self.layout, params)

    def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return self._drive(reads.get_jobs(self.layout, list(params.ids)))

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        with self._translated():
            return reads.list_dead(self.client, self.layout, params)

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        with self._translated():
            names = reads.queue_names(self.client, self.layout)
            return throttling.windows(self.client, self.layout, names, params)

    def requeue(self, params: RequeueParams) -> int:
        reply = self._by_id("requeue", list(params.ids), params.now)
        return 0 if reply is None else int(reply[1])

    def cancel(self, params: CancelParams) -> CancelResult:
        routed, reply = self._by_id("cancel", list(params.ids), params.now) or ({}, [])
        return CancelResult(outcomes=calls.cancel_outcomes(params.ids, routed, reply))

    def _by_id(self, script: str, ids: list[str], now: float) -> tuple[dict[str, str], Any] | None:
        """Run a script over jobs by id (requeue.lua, cancel.lua), each routed by the directory
        (unknown ones left out): the queues found and the reply, or None if none was found."""
        with self._translated():
            queues = self.client.hmget(self.layout.directory, ids) if ids else []
        routed = {i: text(q) for i, q in zip(ids, queues, strict=True) if q is not None}
        if not routed:
            return None
        blocks = calls.blocks(list(routed.values()))
        args: list[Arg] = [self._at(now)]
        for job_id in ids:
            if job_id in routed:
                args += [blocks[routed[job_id]], job_id]
        first = next(iter(routed.values()))
        return routed, self._run_once(script, first, self._keys(blocks, now), args)

    # -- waiting ---------------------------------------------------------------------------

    def wait(self, params: WaitParams) -> None:
        with self._translated():
            self._waiter.wait(params.queues, params.timeout)

    def close(self) -> None:
        self._waiter.close()
        self.client.close()

    # -- plumbing --------------------------------------------------------------------------

    def _translated(self) -> Any:
        return translated(self.options.safe_url)

    def _at(self, now: float) -> str:
        """A call's ``now`` argument: '>' .. now with clock=store, for max(now, the server's
        clock when the function runs: ``now_of`` in _lib.lua); now itself with clock=caller."""
        if self.options.clock is Clock.STORE:
            return ">" + num(now)
        return num(now)

    def _perform(self, request: Request) -> Any:
        """Perform one request of an operation (fairq.backends.steps) with the blocking client."""
        with self._translated():
            if isinstance(request, Batch):
                return run_batch(self.client, request)
            keys, args = request.keys, request.args
            if request.once is not None:
                keys, args = self._once(request.once, keys, args)
            return self._library(self.client, request.op, keys, args)

    def _drive(self, steps: RedisSteps[T]) -> T:
        return drive(steps, self._perform)

    def _run(self, name: str, keys: list[str], args: Sequence[Arg]) -> Any:
        return self._perform(FCall(name, keys, list(args)))

    def _run_once(self, name: str, queue: str, keys: list[str], args: Sequence[Arg]) -> Any:
        """Run a function registered with ``register_once`` (_lib.lua): when redis-py sends
        the call again after its connection failed, the re-sending gets the first sending's
        reply and changes nothing. ``queue``: one of the call's, whose slot the reply is kept in.
        """
        return self._perform(FCall(name, keys, list(args), once=queue))

    def _once(
        self, queue: str, keys: list[str], args: Sequence[Arg]
    ) -> tuple[list[str], list[Arg]]:
        """``keys`` and ``args`` with this thread's reply key in ``queue``'s slot (one per
        thread and queue, so concurrent calls keep their own) and a new call id."""
        caller = f"{self.caller}-{threading.get_ident()}"
        call = FCall("", keys, list(args))
        return once_args(self.layout, queue, caller, os.urandom(8).hex(), call)

    def _keys(self, blocks: dict[str, int], now: float) -> list[str]:
        return self._drive(self._keys_steps(blocks, now))

    def _keys_steps(self, blocks: dict[str, int], now: float) -> RedisSteps[list[str]]:
        """The key blocks of ``blocks`` (queue -> block number), in block order, each ending
        with the queue's figures key of the slot of ``now`` (``Layout.block``); a queue's keys
        are checked (``types_checked``) the first time this store object meets it."""
        keys: list[str] = []
        for queue in sorted(blocks, key=blocks.__getitem__):
            if queue not in self._checked:
                types = self.layout.queue_types(queue)
                yield from types_checked(self.options.safe_url, types, self.layout, queue)
                self._checked.add(queue)
            keys += self.layout.block(queue, now)
        return keys

    def _routed(self, tokens: Sequence[str]) -> list[calls.Routed]:
        return [(token, *self._route(token)) for token in tokens]

    def _route(self, token: str) -> tuple[str | None, str, str]:
        """(queue or None, job id, lease number text) of a lease token."""
        job_id, _, attempt = token.rpartition(":")
        with self._lock:
            queue = self._routes.get(job_id)
        if queue is None and job_id:
            with self._translated():
                found = self.client.hget(self.layout.directory, job_id)
            queue = text(found) if found is not None else None
        return queue, job_id, attempt

    def _remember(self, job_id: str, queue: str) -> None:
        """Cache job -> queue for the leases handed out here (a job never changes queue)."""
        with self._lock:
            self._routes[job_id] = queue
            if len(self._routes) > ROUTE_CACHE:
                self._routes.popitem(last=False)


__all__ = ["RedisBackend"]
