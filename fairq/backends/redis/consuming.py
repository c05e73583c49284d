"""Taking and ending leases: dequeue, ack, heartbeat, fail, release, checkpoint.

A lease token names its job (``job_id:lease``); its queue comes from a cache of the leases
handed out here, else from the directory (``Directory.locate``; a job never changes queue
once stored). Each operation is one script call per ``Layout.group`` of the queues involved:
one call on a single Redis, one per slot on a Cluster.

A dequeue over queues of several slots is one call per run of consecutive queues of one slot
(``plumbing.runs``), in the order asked, each asking for what is still wanted; this hands out
exactly what one call over every queue would: the queues are tried in order for every job,
and a queue that has nothing to give stops giving for the rest of the call (only its own
dispatches change it). Every queue asked is maintained, as one call would: the runs after the
wanted jobs are taken are sent together, asking for none.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from fairq.contract import (
    AckAndDequeueParams,
    AckAndDequeueResult,
    AckManyParams,
    AckManyResult,
    CheckpointParams,
    CheckpointResult,
    DequeueParams,
    DequeueResult,
    FailParams,
    HeartbeatParams,
    HeartbeatResult,
    ReleaseParams,
    no_wait,
)
from fairq.errors import LeaseExpired, LeaseNotFound
from fairq.job import JobInfo, Lease
from fairq.results import JobResult

from . import calls, inspect
from .directory import Directory
from .plumbing import Call, Store, runs
from .records import JobRecord, job_info, lease, num, text
from .scripts import Arg
from .waiting import SLICE, ClusterWaiter, Waiter

ROUTE_CACHE = 100_000


class Consumer:
    def __init__(self, store: Store, directory: Directory, waiter: Waiter | ClusterWaiter):
        self.store = store
        self.layout = store.layout
        self.directory = directory
        self.waiter = waiter
        self._routes: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    # -- dequeue --------------------------------------------------------------------------

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        if params.limit < 1 or not params.queues:
            return DequeueResult()
        if params.wait > 0:
            if isinstance(self.waiter, Waiter):
                return self._dequeue_after_wait(params)
            started = time.monotonic()
            with self.store.translated():
                self.waiter.wait(params.queues, params.wait)
            params = replace(params, now=params.now + time.monotonic() - started, wait=0.0)
        return self._take(params, None)[1]

    def ack_and_dequeue(self, both: AckAndDequeueParams) -> AckAndDequeueResult:
        """The acks of each slot go in the call of its first run (ack_dequeue.lua), before
        that run's dispatch; the acks of slots the dequeue does not ask go with the last."""
        acks, params = both.acks, both.dequeue
        no_wait(params)
        if params.limit < 1 or not params.queues:
            return AckAndDequeueResult(acks=self.ack_many(acks), dequeue=DequeueResult())
        answers, result = self._take(params, acks)
        return AckAndDequeueResult(acks=calls.ack_result(answers), dequeue=result)

    def _take(
        self, params: DequeueParams, acks: AckManyParams | None
    ) -> tuple[list[tuple[str, str]], DequeueResult]:
        routed = self._routed(acks.tokens) if acks is not None else []
        held: dict[int, list[int]] = {}  # group -> places in routed of its held tokens
        for at, (_, queue, _, _) in enumerate(routed):
            if queue is not None:
                held.setdefault(self.layout.group(queue), []).append(at)
        answers = [""] * len(routed)
        leases: list[Lease] = []
        expired: list[Any] = []
        # calls sent together at the end: (call, blocks, places of its acks, queues dequeued)
        rest: list[tuple[Call, dict[str, int], list[int], list[str]]] = []
        for run in runs(self.layout, params.queues):
            mine = held.pop(self.layout.group(run[0]), [])
            wanted = params.limit - len(leases)
            if wanted <= 0 and not mine and self._nothing_due(run, params.now):
                continue  # it would only maintain, and nothing there is due
            call, blocks = self._dequeue_call(params, run, wanted, acks, [routed[a] for a in mine])
            if wanted <= 0:
                rest.append((call, blocks, mine, run))
                continue
            name, queue, keys, args = call
            assert queue is not None
            got = self._reply(
                answers, routed, mine, blocks, run, self.store.run_once(name, queue, keys, args)
            )
            leases += got.leases
            expired += got.expired
        for places in held.values():  # acks of slots the dequeue does not ask
            assert acks is not None
            ours = [routed[a] for a in places]
            call, blocks = self._ack_call("ack_many", ours, acks.now, acks.results)
            rest.append((call, blocks, places, []))
        replies = self.store.run_all([call for call, _, _, _ in rest]) if rest else []
        for (_, blocks, mine, run), reply in zip(rest, replies, strict=True):
            if run:
                expired += self._reply(answers, routed, mine, blocks, run, reply).expired
            else:
                self._answered(answers, routed, mine, [reply])
        paired = list(zip([r[0] for r in routed], answers, strict=True))
        if acks is not None:
            paired = self._rerouted("ack_many", routed, paired, acks.now, acks.results)
        return paired, DequeueResult(leases=leases, expired=expired)

    def _nothing_due(self, queues: list[str], now: float) -> bool:
        """Whether maintaining ``queues`` at ``now`` would change nothing, as far as this
        process knows (``Store.due``)."""
        due = self.store.due
        return all(due.get(queue, -math.inf) > now for queue in queues)

    def _reply(
        self,
        answers: list[str],
        routed: list[calls.Routed],
        mine: list[int],
        blocks: dict[str, int],
        run: list[str],
        reply: list[Any],
    ) -> DequeueResult:
        """A reply of dequeue.lua, or of ack_dequeue.lua (``mine``: the places of its acks,
        whose answers are put in ``answers``): the dequeue's result."""
        if mine:
            self._answered(answers, routed, mine, reply)
            reply = reply[1:]
        return self._dequeued(blocks, reply, run)

    def _dequeue_call(
        self,
        params: DequeueParams,
        run: list[str],
        wanted: int,
        acks: AckManyParams | None,
        mine: list[calls.Routed],
    ) -> tuple[Call, dict[str, int]]:
        """dequeue.lua over ``run`` for ``wanted`` jobs (0: maintenance only), or
        ack_dequeue.lua when ``mine`` has tokens to ack first."""
        blocks = calls.blocks([*run, *(q for _, q, _, _ in mine if q is not None)])
        order: list[Arg] = [blocks[q] for q in run]
        at = self.store.at(params.now)
        keys = self.store.keys(blocks, params.now)
        args: list[Arg] = [at, max(wanted, 0), params.worker_id, calls.hold_arg(params.hold)]
        if not mine or acks is None:
            return ("dequeue", run[0], keys, [*args, *order]), blocks
        args += [len(order), *order]
        args += [self.store.at(acks.now), *calls.result_args(mine, acks.results)]
        args += calls.held_args(mine, blocks)
        return ("ack_dequeue", run[0], keys, args), blocks

    def _ack_call(
        self,
        script: str,
        routed: list[calls.Routed],
        now: float,
        results: Mapping[str, JobResult] | None = None,
        options: Sequence[Arg] = (),
    ) -> tuple[Call, dict[str, int]]:
        """A per-lease script (ack_many, heartbeat) over routed tokens of one group;
        ``results``: ack_many.lua's (``calls.result_args``); ``options``: heartbeat.lua's."""
        queues = [q for _, q, _, _ in routed if q is not None]
        blocks = calls.blocks(queues)
        extra = [*options] if results is None else calls.result_args(routed, results)
        args: list[Arg] = [self.store.at(now), *extra, *calls.held_args(routed, blocks)]
        return (script, queues[0], self.store.keys(blocks, now, lowers=False), args), blocks

    @staticmethod
    def _answered(
        answers: list[str], routed: list[calls.Routed], places: list[int], reply: list[Any]
    ) -> None:
        """Put the acks' answers of a reply (its first value) in their tokens' places."""
        if places:
            for at, (_, answer) in zip(
                places, calls.answers([routed[a] for a in places], reply[0]), strict=True
            ):
                answers[at] = answer

    def _dequeued(
        self, blocks: dict[str, int], reply: list[Any], order: Sequence[str]
    ) -> DequeueResult:
        """A dequeue's reply (dequeue.lua) over the queues ``order``: the leases expired, the
        queues' dues (remembered: ``Store.due``), then the leases handed out, their routes
        remembered."""
        names = {block: name for name, block in blocks.items()}
        for queue, due in zip(order, reply[1], strict=True):
            self.store.due[queue] = float(due) if due else -math.inf
        found: list[Lease] = []
        for at in range(2, len(reply), 5):
            block, job_id, raw, body, tenant = reply[at : at + 5]
            found.append(lease(text(job_id), names[int(block)], raw, body, text(tenant)))
        self._remember({item.job_id: item.queue for item in found})
        return DequeueResult(leases=found, expired=calls.expired(names, reply[0]))

    def _dequeue_after_wait(self, params: DequeueParams) -> DequeueResult:
        """A single Redis: BLPOP slices, each with the dequeue pipelined behind it (at the
        later of the sender's and the server's clock: ``now_of`` in _lib.lua), until a token
        wakes us, a job is taken or the wait is over."""
        assert isinstance(self.waiter, Waiter)
        blocks = calls.blocks(params.queues)
        rest: list[Arg] = [
            params.limit,
            params.worker_id,
            calls.hold_arg(params.hold),
            *blocks.values(),
        ]
        started = time.monotonic()
        while True:
            waited = time.monotonic() - started
            at = ">" + num(params.now + waited)
            keys = self.store.keys(blocks, params.now + waited)  # figures: the slot it runs in
            sent, args = self.store.once(params.queues[0], keys, [at, *rest])
            with self.store.translated():
                woke, reply = self.waiter.wait_then(
                    params.queues,
                    params.wait - waited,
                    partial(self.store.library.pipe, op="dequeue", keys=sent, args=args),
                )
                reply = self.store.library.answer(self.store.client, reply, "dequeue", sent, args)
            if woke or len(reply) > 2 or params.wait - waited <= SLICE:
                return self._dequeued(blocks, reply, list(blocks))

    # -- leases ---------------------------------------------------------------------------

    def ack_many(self, params: AckManyParams) -> AckManyResult:
        """One script (ack_many.lua) per group of the tokens' queues."""
        answers = self._per_lease("ack_many", params.tokens, params.now, params.results)
        return calls.ack_result(answers)

    def heartbeat(self, params: HeartbeatParams) -> HeartbeatResult:
        """heartbeat.lua per group, with ``claim`` and ``hold`` as its options; a cancel request
        comes back with its deadline, and under a hold a lease a worker claimed in ``claimed``."""
        options: list[Arg] = ["1" if params.claim else "", calls.hold_arg(params.hold)]
        answers = self._per_lease("heartbeat", params.tokens, params.now, options=options)
        return calls.heartbeat_result(answers)

    def _per_lease(
        self,
        script: str,
        tokens: Sequence[str],
        now: float,
        results: Mapping[str, JobResult] | None = None,
        options: Sequence[Arg] = (),
    ) -> list[tuple[str, str]]:
        """Run a per-lease script (``each_held`` in _lib_leases.lua) over ``tokens``, one call
        per group: each token's answer, '' for a lost lease (one whose job is not routed too).
        ``results``: ack_many.lua's; ``options``: heartbeat.lua's."""
        routed = self._routed(tokens)
        by_group: dict[int, list[int]] = {}
        for at, (_, queue, _, _) in enumerate(routed):
            if queue is not None:
                by_group.setdefault(self.layout.group(queue), []).append(at)
        answers = [""] * len(routed)
        if by_group:
            made = [
                self._ack_call(script, [routed[a] for a in p], now, results, options)
                for p in by_group.values()
            ]
            replies = self.store.run_all([call for call, _ in made])
            for places, reply in zip(by_group.values(), replies, strict=True):
                self._answered(answers, routed, places, [reply])
        paired = list(zip([r[0] for r in routed], answers, strict=True))
        return self._rerouted(script, routed, paired, now, results, options)

    def _rerouted(
        self,
        script: str,
        routed: list[calls.Routed],
        answers: list[tuple[str, str]],
        now: float,
        results: Mapping[str, JobResult] | None = None,
        options: Sequence[Arg] = (),
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
        again = dict(self._per_lease(script, stale, now, results, options))
        return [(token, again.get(token, answer)) for token, answer in answers]

    def fail(self, params: FailParams) -> JobInfo:
        queue, job_id, attempt = self._route(params.token)
        retry = "" if params.retry_at is None else num(params.retry_at)
        args: list[Arg] = [job_id, attempt, self.store.at(params.now), params.error, retry]
        reply = self._end("fail", queue, args, params.token, params.now)
        record = JobRecord.parse(reply[1])
        assert queue is not None  # _end raised otherwise
        info = job_info(job_id, queue, record, reply[2], text(reply[3]), text(reply[4]))
        return inspect.with_progress(info, reply[5] or None)

    def release(self, params: ReleaseParams) -> None:
        queue, job_id, attempt = self._route(params.token)
        run_at = "" if params.run_at is None else num(params.run_at)
        args: list[Arg] = [job_id, attempt, self.store.at(params.now), run_at]
        if params.note is not None:
            args.append(params.note)
        self._end("release", queue, args, params.token, params.now)

    def checkpoint(self, params: CheckpointParams) -> CheckpointResult:
        queue, job_id, attempt = self._route(params.token)
        args: list[Arg] = [job_id, attempt, self.store.at(params.now), params.progress]
        reply = self._end("checkpoint", queue, args, params.token, params.now)
        return CheckpointResult(deadline=float(reply[1]))

    def _end(
        self, name: str, queue: str | None, args: list[Arg], token: str, now: float
    ) -> list[Any]:
        if queue is None:
            raise LeaseNotFound.of(token)
        keys = self.store.keys({queue: 1}, now, lowers=name != "checkpoint")
        reply: list[Any] = self.store.run_once(name, queue, keys, args)
        if text(reply[0]) == "nf" and self._forget(str(args[0]), queue):
            return self._end(name, self._route(token)[0], args, token, now)
        status = text(reply[0])
        if status == "nf":
            raise LeaseNotFound.of(token)
        if status == "exp":
            raise LeaseExpired.of(token, float(reply[1]), now)
        return reply

    # -- routes ---------------------------------------------------------------------------

    def _forget(self, job_id: str, queue: str) -> bool:
        """Drop a cached route that proved wrong (an id reused after pruning); True if so."""
        with self._lock:
            cached = self._routes.pop(job_id, None)
        if cached is None:
            return False
        with self.store.translated():
            found = self.directory.locate([job_id]).get(job_id)
        return found is not None and found != queue

    def _remember(self, routes: Mapping[str, str]) -> None:
        """Cache job id -> queue (the most recent ROUTE_CACHE); a wrong one is found out and
        dropped when its lease proves lost (``_rerouted``, ``_end``)."""
        with self._lock:
            self._routes.update(routes)
            while len(self._routes) > ROUTE_CACHE:
                self._routes.popitem(last=False)

    def _routed(self, tokens: Sequence[str]) -> list[calls.Routed]:
        """(token, queue or None, job id, lease number text) of each token: its queue from the
        cache, else from the directory (one lookup for all the tokens not cached)."""
        split = [(token, *token.rpartition(":")[::2]) for token in tokens]
        with self._lock:
            known = {i: self._routes.get(i) for _, i, _ in split}
        missing = [i for i, queue in known.items() if queue is None and i]
        if missing:
            with self.store.translated():
                located = self.directory.locate(missing)
            self._remember(located)  # a relayed job's claim, then its ack: one lookup
            known.update(located)
        return [(token, known.get(job_id), job_id, attempt) for token, job_id, attempt in split]

    def _route(self, token: str) -> tuple[str | None, str, str]:
        """(queue or None, job id, lease number text) of a lease token."""
        _, queue, job_id, attempt = self._routed([token])[0]
        return queue, job_id, attempt
