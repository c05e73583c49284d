"""``RedisBackend``: every state change is a Lua function (FCALL); reads are plain commands.

Python validates input, finds the queue of a job id (``Directory.locate``; a job never changes
queue once stored), packs KEYS and ARGV, and turns script replies into records or errors. It
never reads state to decide what to write: that happens inside the scripts, atomically. See
keys.py for the layout and lua/_lib.lua for the stored records. Enqueueing jobs with throttle
rules is the one operation in two scripts: the window's record + decide (route.lua, in the
home queue's Cluster slot), then the store (enqueue.lua, in the chosen queue's); throttling.py
says why and what that gives up. Every call whose re-sending by redis-py would change the
outcome is sent once (``Store.run_once``).

On a single Redis each operation is one script call. On a Redis Cluster (``?cluster=1``) a
script touches one slot, so an operation over queues of several slots is one call per slot
(plumbing.py, consuming.py): atomic per slot, not across slots; a batch enqueue's ids are
claimed in the directory first (directory.py). docs/redis.md states what that gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    AcquireSlotParams,
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
)
from fairq.errors import ConfigError, PayloadTooLarge
from fairq.figures import FiguresParams, TenantFigures
from fairq.job import JobInfo, NewJob, check_distinct
from fairq.policy.throttle import Routing

from . import calls, cluster, figures, reads, slots, throttling
from .checks import check_types
from .connection import RedisOptions, check_eviction, check_version, parse_url
from .consuming import Consumer
from .directory import Directory
from .plumbing import Call, Store, grouped, runs
from .records import (
    QueueDefaults,
    TenantRecord,
    num,
    oldest_ready_at,
    rate_arg,
    rate_from,
    text,
)
from .scripts import Arg
from .waiting import ClusterWaiter, Waiter

PRIORITY_RANGE = range(-(2**31), 2**31)


class RedisBackend:
    """Fair per-tenant queues in Redis (``redis://``, ``rediss://`` or ``unix://`` URLs).

    URL options: ``prefix`` (key prefix, default ``fairq``), ``max_payload_bytes``,
    ``clock`` (``store``, the default, or ``caller``: fairq/backends/clock.py), ``cluster=1``
    (a Redis Cluster; ``cluster_nodes=host:port,…`` more nodes to start from) and
    ``wait_replicas=n`` / ``wait_timeout=seconds`` (an enqueue waits for n replicas).
    """

    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self._store = Store(options)
        self.layout = self._store.layout
        self.client: Any = self._store.client
        try:
            with self._store.translated():
                self._check_servers()
                check_types(self.client, self.options.safe_url, self.layout.global_types())
                if options.wait_replicas:  # so that every enqueue's WAIT covers its jobs
                    self._store.library.load(self.client)
        except BaseException:
            self.client.close()
            raise
        self._directory = Directory(self._store)
        waiter = (ClusterWaiter if options.cluster else Waiter)(options, self.layout)
        self._consumer = Consumer(self._store, self._directory, waiter)

    @classmethod
    def from_url(cls, url: str) -> RedisBackend:
        return cls(parse_url(url))

    def _check_servers(self) -> None:
        """The version and eviction policy of the server (every master of a Cluster), and that
        the URL says whether it is a Cluster."""
        if self.options.cluster:
            infos = cluster.servers(self.client, "server", "memory")
        else:
            infos = [self.client.info("server", "memory", "cluster")]
            if int(infos[0].get("cluster_enabled", 0)):
                raise ConfigError(
                    f"Redis at {self.options.safe_url} is a Redis Cluster node: add cluster=1 "
                    "to the URL (redis://host:port/?cluster=1)"
                )
        for info in infos:
            check_version(text(info["redis_version"]))
            policy, limit = text(info.get("maxmemory_policy", "")), info.get("maxmemory", 0)
            check_eviction(self.options.safe_url, policy, int(limit))

    # -- producing -------------------------------------------------------------------------

    def enqueue(self, params: EnqueueParams) -> EnqueueResult:
        """Route jobs with throttle rules (throttling.py: its own script, in the home queue's
        slot), then store every job in its queue: one enqueue.lua call per group of queues
        (one call on a single Redis). On a Cluster the ids are claimed in the directory
        first, and released again for the jobs not stored when a call fails."""
        jobs = list(params.jobs)
        if not jobs:
            return EnqueueResult(queues=[])
        self._check_jobs(jobs)
        on_cluster, nonce = self.layout.cluster, self._directory.nonce()
        try:
            if on_cluster:
                with self._store.translated():
                    self._directory.claim(jobs, nonce)
            queues = [job.queue for job in jobs]
            if any(job.throttle for job in jobs):
                if not on_cluster:
                    self._refuse_stored([job.id for job in jobs])
                at = self._store.at(params.now)
                queues = throttling.route(self._store.run_once, self.layout, jobs, at)
            if on_cluster:
                pairs = zip(jobs, queues, strict=True)
                self._store.register(queue for job, queue in pairs if not job.shards)
            chosen = self._store_jobs(jobs, queues, params.now)
        except BaseException:
            if on_cluster:  # best effort: the error to report is the first one
                with contextlib.suppress(Exception):
                    self._directory.release_unstored(jobs, nonce)
            raise
        if on_cluster:
            self._store.register(q for job, q in zip(jobs, chosen, strict=True) if job.shards)
        return EnqueueResult(queues=chosen)

    def _store_jobs(self, jobs: list[NewJob], queues: list[str], now: float) -> list[str]:
        """enqueue.lua per group; the queue each job went to (a sharded job's: the script's
        choice). DuplicateJob when a call found ids stored."""
        floor = self._store.seq_floor(len(jobs))
        by_group: dict[int, list[int]] = {}
        for at, (job, queue) in enumerate(zip(jobs, queues, strict=True)):
            by_group.setdefault(self.layout.group((job.shards or (queue,))[0]), []).append(at)
        made: list[tuple[Call, list[int], dict[str, int]]] = []
        for places in by_group.values():
            blocks = calls.blocks([q for at in places for q in (jobs[at].shards or (queues[at],))])
            shared = [] if self.layout.cluster else [self.layout.directory, self.layout.queues]
            args: list[Arg] = [len(shared), self._store.at(now), floor, len(blocks), *blocks]
            args.append(len(places))
            for at in places:
                args += calls.job_args(calls.block_of(blocks, jobs[at], queues[at]), jobs[at], at)
            keys = [*shared, *self._store.keys(blocks, now)]
            made.append((("enqueue", next(iter(blocks)), keys, args), places, blocks))
        sent = [call for call, _, _ in made]
        try:
            replied = self._store.run_all(sent, replicated=self.options.wait_replicas > 0)
        except cluster.NotReplicated as exc:
            raise cluster.NotReplicated(
                f"the jobs are stored, but {exc}: should their master fail now they could be "
                "lost. Check the replicas' links, or raise wait_timeout"
            ) from None
        chosen, duplicates = list(queues), []
        for (_, places, blocks), reply in zip(made, replied, strict=True):
            if reply and text(reply[0]) == "dup":
                duplicates += [text(i) for i in reply[1:]]
            elif reply:  # a sharded job's queue is the script's choice
                names = list(blocks)
                for at, block in zip(places, reply[1:], strict=True):
                    chosen[at] = names[int(block) - 1]
        if duplicates:
            raise calls.duplicate(duplicates)
        return chosen

    def _refuse_stored(self, ids: list[str]) -> None:
        """DuplicateJob before a throttle window records anything (enqueue.lua checks again)."""
        with self._store.translated():
            found = self._directory.locate(ids)
        if found:
            raise calls.duplicate([i for i in ids if i in found])

    def _check_jobs(self, jobs: Sequence[NewJob]) -> None:
        check_distinct(jobs)
        for job in jobs:
            size = len(job.payload.encode("utf-8"))
            if size > self.options.max_payload_bytes:
                raise PayloadTooLarge(
                    f"job {job.id!r} has a payload of {size} bytes, over this Redis store's "
                    f"limit of {self.options.max_payload_bytes} bytes; store large data "
                    "elsewhere and pass a reference, or raise ?max_payload_bytes= in the URL"
                )
            if job.priority not in PRIORITY_RANGE:
                raise ConfigError(f"priority must fit in 32 bits, got {job.priority}")
            if not job.tenant:
                raise ConfigError(f"job {job.id!r} has an empty tenant")

    # -- consuming (consuming.py) ------------------------------------------------------------

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        return self._consumer.dequeue(params)

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        return self._consumer.ack_many(params)

    def ack_and_dequeue(self, params: AckAndDequeueParams) -> AckAndDequeueResult:
        return self._consumer.ack_and_dequeue(params)

    def fail(self, params: FailParams) -> JobInfo:
        return self._consumer.fail(params)

    def release(self, params: ReleaseParams) -> None:
        self._consumer.release(params)

    def checkpoint(self, params: CheckpointParams) -> CheckpointResult:
        return self._consumer.checkpoint(params)

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        return self._consumer.heartbeat(params)

    # -- routing and tenant slots (for peer brokers' jobs) -----------------------------------

    def route(self, params: RouteParams) -> RouteResult:
        """route.lua, as an enqueue's throttle rules run it (throttling.count). The home queue
        joins the queues seen, where ``throttle_windows`` looks."""
        routing = Routing(params.name, params.tenant, params.queue, params.rules)
        if params.rules:
            self._store.register([params.queue])
        at = self._store.at(params.now)
        (queue,) = throttling.count(self._store.run_once, self.layout, [routing], at)
        return RouteResult(queue=queue)

    def acquire_slot(self, params: AcquireSlotParams) -> SlotResult:
        block = self._store.keys({params.queue: 1}, params.now, lowers=False)
        at = self._store.at(params.now)
        return slots.acquire(self._store.run_once, block, self.layout, params, at)

    def renew_slots(self, params: RenewSlotsParams) -> RenewSlotsResult:
        at = self._store.at(params.now)
        answers = slots.each(self._store.run_once, self.layout, "renew_slots", params.tokens, at)
        pairs = list(zip(params.tokens, answers, strict=True))
        return RenewSlotsResult(
            deadlines={token: float(answer) for token, answer in pairs if answer},
            lost=[token for token, answer in pairs if not answer],
        )

    def release_slots(self, params: ReleaseSlotsParams) -> ReleaseSlotsResult:
        at = self._store.at(params.now)
        answers = slots.each(self._store.run_once, self.layout, "release_slots", params.tokens, at)
        pairs = list(zip(params.tokens, answers, strict=True))
        return ReleaseSlotsResult(
            released=[token for token, answer in pairs if answer],
            lost=[token for token, answer in pairs if not answer],
        )

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self, params: MaintainParams) -> MaintainResult:
        """maintain.lua per run of queues of one group (one call on a single Redis), the
        queues only pruned joining the call of their group; on a Cluster the ids pruned then
        leave the directory."""
        with self._store.translated():
            known = reads.queue_names(self.client, self.layout)
        asked = known if params.queues is None else list(dict.fromkeys(params.queues))
        pruned_only = [q for q in known if q not in asked] if params.retention is not None else []
        others = grouped(self.layout, pruned_only)
        parts = [(r, others.pop(self.layout.group(r[0]), [])) for r in runs(self.layout, asked)]
        parts += [([], queues) for queues in others.values()]
        retention = "" if params.retention is None else num(params.retention)
        made: list[tuple[Call, dict[str, int]]] = []
        for maintained, pruned in parts:
            blocks = calls.blocks([*maintained, *pruned])
            shared = [] if self.layout.cluster else [self.layout.directory]
            keys = [*shared, *self._store.keys(blocks, params.now)]
            args: list[Arg] = [self._store.at(params.now), retention, len(maintained), len(shared)]
            made.append((("maintain", None, keys, args), blocks))
        replies = self._store.run_all([call for call, _ in made]) if made else []
        result = MaintainResult()
        gone: list[str] = []
        for (_, blocks), reply in zip(made, replies, strict=True):
            due = text(reply[2])
            names = {block: name for name, block in blocks.items()}
            next_due = float(due) if due else None
            if result.next_due is not None and (next_due is None or result.next_due < next_due):
                next_due = result.next_due
            result = MaintainResult(
                promoted=result.promoted + int(reply[0]),
                expired=[*result.expired, *calls.expired(names, reply[3])],
                pruned=result.pruned + int(reply[1]),
                next_due=next_due,
            )
            gone += [text(i) for i in reply[4]]
        if gone:
            with self._store.translated():
                self._directory.release(gone)
        return result

    # -- settings --------------------------------------------------------------------------

    def _settings_keys(self, queue: str, now: float) -> tuple[list[str], int]:
        """A settings script's keys, and how many of them are shared by queues: the queues set
        first on a single Redis (the script adds the queue); on a Cluster the queue is
        registered here."""
        keys = self._store.keys({queue: 1}, now)
        if self.layout.cluster:
            self._store.register([queue])
            return keys, 0
        return [self.layout.queues, *keys], 1

    def set_queue(self, params: SetQueueParams) -> None:
        settings = params.settings
        cap = "" if settings.max_running is None else str(settings.max_running)
        rate = rate_arg(settings.rate).split(",") if settings.rate else ["", "", ""]
        half_life = "" if settings.half_life is None else num(settings.half_life)
        in_flight = "" if settings.max_in_flight is None else str(settings.max_in_flight)
        keys, shared = self._settings_keys(settings.queue, params.now)
        args: list[Arg] = [settings.queue, num(settings.weight), cap, *rate, half_life]
        args += [num(settings.max_debt), self._store.at(params.now), in_flight, shared]
        self._store.run("set_queue", keys, args)

    def get_queue(self, params: GetQueueParams) -> QueueSettings:
        with self._store.translated():
            return reads.get_queue(self.client, self.layout, params.queue)

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        keys, shared = self._settings_keys(params.queue, params.now)
        args: list[Arg] = [
            params.queue,
            params.tenant,
            calls.setting(params.weight, num),
            calls.setting(params.max_running, str),
            "keep" if isinstance(params.rate, Keep) else rate_arg(params.rate),
            self._store.at(params.now),
            shared,
        ]
        raw, oldest, *meta = self._store.run("set_tenant", keys, args)
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
            with self._store.translated():
                self.client.hset(self.layout.types, mapping=mapping)

    def job_types(self) -> dict[str, JobType]:
        with self._store.translated():
            return reads.job_types(self.client, self.layout)

    # -- inspection ------------------------------------------------------------------------

    def stats(self, params: StatsParams) -> list[TenantStats]:
        with self._store.translated():
            return reads.stats(self.client, self.layout, params)

    def figures(self, params: FiguresParams) -> list[TenantFigures]:
        with self._store.translated():
            return figures.read(self.client, self.layout, params)

    def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        ids = list(params.ids)
        with self._store.translated():
            return reads.get_jobs(self.client, self.layout, self._directory.locate(ids), ids)

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        with self._store.translated():
            return reads.list_dead(self.client, self.layout, params)

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        with self._store.translated():
            names = reads.queue_names(self.client, self.layout)
            return throttling.windows(self.client, self.layout, names, params)

    def requeue(self, params: RequeueParams) -> int:
        """requeue.lua per group of the dead jobs' queues."""
        ids = list(params.ids)
        with self._store.translated():
            located = self._directory.locate(ids)
        by_group: dict[int, list[str]] = {}
        for job_id in ids:
            if job_id in located:
                by_group.setdefault(self.layout.group(located[job_id]), []).append(job_id)
        made: list[Call] = []
        for group_ids in by_group.values():
            blocks = calls.blocks([located[i] for i in group_ids])
            args: list[Arg] = [self._store.at(params.now)]
            for job_id in group_ids:
                args += [blocks[located[job_id]], job_id]
            keys = self._store.keys(blocks, params.now, lowers=False)
            made.append(("requeue", located[group_ids[0]], keys, args))
        return sum(int(reply) for reply in self._store.run_all(made)) if made else 0

    # -- waiting ---------------------------------------------------------------------------

    def wait(self, params: WaitParams) -> None:
        with self._store.translated():
            self._consumer.waiter.wait(params.queues, params.timeout)

    def close(self) -> None:
        self._consumer.waiter.close()
        self.client.close()


__all__ = ["RedisBackend"]
