"""``RedisBackend``: every state change is a Lua function (FCALL); reads are plain commands.

Python validates input, finds the queue of a job id (``Directory.locate``; a job never changes
queue once stored), packs KEYS and ARGV, and turns script replies into records or errors. It
never reads state to decide what to write: that happens inside the scripts, atomically. See
keys.py for the layout and lua/_lib.lua for the stored records. Enqueueing jobs with throttle
rules is the one operation in two scripts: the window's record + decide (route.lua, in the
home queue's Cluster slot), then the store (enqueue.lua, in the chosen queue's); throttling.py
says why and what that gives up. Every call whose re-sending by redis-py would change the
outcome is sent once (``Store.run_once``). Enqueue (producing.py), the settings (settings.py)
and some reads are written as steps (fairq.backends.steps), which the asyncio store (aio.py)
drives too; maintenance is maintenance.py.

On a single Redis each operation is one script call. On a Redis Cluster (``?cluster=1``) a
script touches one slot, so an operation over queues of several slots is one call per slot
(plumbing.py, consuming.py): atomic per slot, not across slots; a batch enqueue's ids are
claimed in the directory first (directory.py). docs/redis.md states what that gives.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, TypeVar

from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    AcquireSlotParams,
    CancelOutcome,
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
    TenantSettingsParams,
    TenantStats,
    ThrottleWindowsParams,
    WaitParams,
    Woken,
)
from fairq.errors import ConfigError
from fairq.figures import FiguresParams, TenantFigures
from fairq.job import JobInfo
from fairq.policy.throttle import Routing

from . import calls, cluster, figures, history, inspect, maintenance, settings, slots, throttling
from .checks import check_types
from .consuming import Consumer
from .db import check_eviction, check_version, opening
from .directory import Directory
from .plumbing import Call, Store
from .producing import Producer
from .records import text
from .scripts import Arg
from .steps import RedisSteps
from .url import RedisOptions, parse_url
from .waiting import ClusterWaiter, Waiter

T = TypeVar("T")


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
        self.caller = self._store.caller
        try:
            with self._store.translated():
                with nullcontext() if options.cluster else opening(self.client):
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
        self._producer = Producer(self._store, self._directory)

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
        return self._store.drive(self.enqueue_steps(params))

    def enqueue_steps(self, params: EnqueueParams) -> RedisSteps[EnqueueResult]:
        """Route jobs with throttle rules, then store every job in its queue: one
        enqueue.lua call per group of queues (producing.py)."""
        return self._producer.enqueue_steps(params)

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
        (queue,) = self._store.drive(throttling.count(self.layout, [routing], at))
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
            wake=[Woken(*answer[1:].split(":", 1)) for answer in answers if len(answer) > 1],
        )

    def leave_line(self, params: LeaveLineParams) -> bool:
        keys = list(self.layout.slot_keys(params.queue, params.tenant))
        return bool(self._store.run_once("leave_line", params.queue, keys, [params.waiter]))

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self, params: MaintainParams) -> MaintainResult:
        return maintenance.maintain(self._store, self._directory, params)

    # -- settings --------------------------------------------------------------------------

    def set_queue(self, params: SetQueueParams) -> None:
        self._store.drive(self.set_queue_steps(params))

    def set_queue_steps(self, params: SetQueueParams) -> RedisSteps[None]:
        return settings.set_queue(self._store, params)

    def get_queue(self, params: GetQueueParams) -> QueueSettings:
        with self._store.translated():
            return inspect.get_queue(self.client, self.layout, params.queue)

    def set_tenant(self, params: TenantSettingsParams) -> TenantStats:
        return self._store.drive(self.set_tenant_steps(params))

    def set_tenant_steps(self, params: TenantSettingsParams) -> RedisSteps[TenantStats]:
        return settings.set_tenant(self._store, params)

    def publish_job_types(self, params: PublishJobTypesParams) -> None:
        types = params.types
        if types:
            mapping = {t.name: inspect.job_type_json(t) for t in types}
            with self._store.translated():
                self.client.hset(self.layout.types, mapping=mapping)

    def job_types(self) -> dict[str, JobType]:
        return self._store.drive(inspect.job_types(self.layout))

    # -- inspection ------------------------------------------------------------------------

    def stats(self, params: StatsParams) -> list[TenantStats]:
        return self._store.drive(inspect.stats(self.layout, params))

    def figures(self, params: FiguresParams) -> list[TenantFigures]:
        with self._store.translated():
            return figures.read(self.client, self.layout, params)

    def get_jobs(self, params: GetJobsParams) -> list[JobInfo]:
        return self._store.drive(self.get_jobs_steps(params))

    def get_jobs_steps(self, params: GetJobsParams) -> RedisSteps[list[JobInfo]]:
        ids = list(params.ids)
        located = yield from self._directory.locate_steps(ids)
        return (yield from inspect.get_jobs(self.layout, located, ids))

    def job_costs(self, params: JobCostsParams) -> list[JobCost]:
        return self._store.drive(inspect.job_costs(self.layout, params))

    def history(self, params: HistoryParams) -> HistoryPage:
        return self._store.drive(history.read(self.layout, params))

    def list_dead(self, params: ListDeadParams) -> list[JobInfo]:
        with self._store.translated():
            return inspect.list_dead(self.client, self.layout, params)

    def throttle_windows(self, params: ThrottleWindowsParams) -> dict[tuple[str, str], list[float]]:
        with self._store.translated():
            names = inspect.queue_names(self.client, self.layout)
            return throttling.windows(self.client, self.layout, names, params)

    def requeue(self, params: RequeueParams) -> int:
        """requeue.lua per group of the dead jobs' queues."""
        return sum(int(reply) for _, reply in self._by_id("requeue", list(params.ids), params.now))

    def cancel(self, params: CancelParams) -> CancelResult:
        """cancel.lua per group of the jobs' queues; an id no queue holds is unknown."""
        ids = list(params.ids)
        outcomes = [CancelOutcome.UNKNOWN] * len(ids)
        for places, reply in self._by_id("cancel", ids, params.now):
            for at, answer in zip(places, reply, strict=True):
                outcomes[at] = CancelOutcome(text(answer))
        return CancelResult(outcomes=outcomes)

    def _by_id(self, script: str, ids: list[str], now: float) -> list[tuple[list[int], Any]]:
        """Run a script over jobs by id (requeue.lua, cancel.lua: block, id per job), each
        found by ``Directory.locate`` (unknown ones left out), one call per group of their
        queues: the places in ``ids`` each call was sent, and its reply."""
        with self._store.translated():
            located = self._directory.locate(ids)
        by_group: dict[int, list[int]] = {}
        for at, job_id in enumerate(ids):
            if job_id in located:
                by_group.setdefault(self.layout.group(located[job_id]), []).append(at)
        made: list[Call] = []
        for places in by_group.values():
            blocks = calls.blocks([located[ids[at]] for at in places])
            args: list[Arg] = [self._store.at(now)]
            for at in places:
                args += [blocks[located[ids[at]]], ids[at]]
            keys = self._store.keys(blocks, now, lowers=script == "cancel")
            made.append((script, located[ids[places[0]]], keys, args))
        replies = self._store.run_all(made) if made else []
        return list(zip(by_group.values(), replies, strict=True))

    # -- waiting ---------------------------------------------------------------------------

    def wait(self, params: WaitParams) -> None:
        with self._store.translated():
            self._consumer.waiter.wait(params.queues, params.timeout)

    def close(self) -> None:
        self._consumer.waiter.close()
        self.client.close()


__all__ = ["RedisBackend"]
