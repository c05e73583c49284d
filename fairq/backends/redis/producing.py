"""Enqueue on Redis, as steps (fairq.backends.steps): the blocking store drives them, and so
does the asyncio store on a single Redis (aio.py).

Jobs with throttle rules are routed first (throttling.py: route.lua, in the home queue's
slot), then every job is stored in its queue by enqueue.lua: one call on a single Redis (the
directory entries, the queues seen and the jobs, all or none), one call per slot on a Redis
Cluster, whose ids are claimed in the directory before (directory.py) and released again for
the jobs not stored when a call fails. A job's unique key is its queue's (``Layout.unique_key``),
so it goes with the job in its slot's call (_lib_unique.lua).

On a Cluster the claims, the registry of queues and the calls split per slot are ``Blocking``
requests: the blocking client's per-master pipelines (plumbing.py).
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from fairq.contract import EnqueueParams, EnqueueResult
from fairq.job import NewJob

from . import calls, cluster, throttling
from .directory import Directory
from .plumbing import Call, Store
from .records import text
from .scripts import Arg
from .steps import Blocking, FCall, RedisSteps


class Producer:
    def __init__(self, store: Store, directory: Directory) -> None:
        self.store = store
        self.layout = store.layout
        self.directory = directory

    def enqueue_steps(self, params: EnqueueParams) -> RedisSteps[EnqueueResult]:
        jobs = list(params.jobs)
        if not jobs:
            return EnqueueResult(queues=[])
        calls.check_jobs(jobs, self.store.options.max_payload_bytes)
        on_cluster, nonce = self.layout.cluster, self.directory.nonce()
        try:
            if on_cluster:
                yield Blocking(partial(self._claim, jobs, nonce))
            queues = [job.queue for job in jobs]
            if any(job.throttle for job in jobs):
                if not on_cluster:
                    # a job with a unique key is never throttled; its id is checked if stored
                    unkeyed = [job.id for job in jobs if job.unique is None]
                    yield from throttling.refuse_stored(self.layout, unkeyed)
                at = self.store.at(params.now)
                queues = yield from throttling.route(self.layout, jobs, at)
            if on_cluster:
                pairs = zip(jobs, queues, strict=True)
                seen = [queue for job, queue in pairs if not job.shards]
                yield Blocking(partial(self.store.register, seen))
            result = yield from self._store_jobs(jobs, queues, params.now)
        except BaseException as exc:
            if on_cluster and not isinstance(exc, GeneratorExit):
                with contextlib.suppress(Exception):  # best effort: the error to report is exc
                    self._release(jobs, nonce)
            raise
        if on_cluster:
            chosen = zip(jobs, result.queues, strict=True)
            sharded = [queue for job, queue in chosen if job.shards and queue]
            yield Blocking(partial(self.store.register, sharded))
            if result.existing:  # held keys' jobs were not stored: their claims go
                yield Blocking(partial(self._release, [jobs[i] for i in result.existing], nonce))
        return result

    def _store_jobs(
        self, jobs: list[NewJob], queues: list[str], now: float
    ) -> RedisSteps[EnqueueResult]:
        """enqueue.lua per group (one call on a single Redis): the queue each job went to (a
        sharded job's: the script's choice; a held key's job: its holder's) and the holders.
        DuplicateJob when a call found ids stored."""
        floor = self.store.seq_floor(len(jobs))
        by_group: dict[int, list[int]] = {}
        for at, (job, queue) in enumerate(zip(jobs, queues, strict=True)):
            by_group.setdefault(self.layout.group((job.shards or (queue,))[0]), []).append(at)
        shared = [] if self.layout.cluster else [self.layout.directory, self.layout.queues]
        made: list[tuple[FCall, list[int], list[str]]] = []
        for places in by_group.values():
            blocks = calls.blocks([q for at in places for q in (jobs[at].shards or (queues[at],))])
            args: list[Arg] = [len(shared), self.store.at(now), floor, len(blocks), *blocks]
            args.append(len(places))
            for at in places:
                args += calls.job_args(calls.block_of(blocks, jobs[at], queues[at]), jobs[at], at)
            keys = [*shared, *(yield from self.store.keys_steps(blocks, now))]
            unique_keys, unique_args = calls.unique_args(self.layout, [jobs[at] for at in places])
            call = FCall("enqueue", keys + unique_keys, args + unique_args, once=next(iter(blocks)))
            made.append((call, places, list(blocks)))
        sent = [call for call, _, _ in made]
        if len(sent) == 1 and not self.store.options.wait_replicas:
            replies: list[Any] = [(yield sent[0])]
        else:
            replies = yield Blocking(partial(self._run_all, sent))
        chosen, existing, duplicates, stored = list(queues), {}, [], []
        for (_, places, names), reply in zip(made, replies, strict=True):
            if reply and text(reply[0]) == "dup":
                duplicates += [text(i) for i in reply[1:]]
            elif reply:
                got = calls.enqueued(names, len(places), reply)
                for at, queue in zip(places, got.queues, strict=True):
                    chosen[at] = queue
                existing.update({places[i]: job_id for i, job_id in got.existing.items()})
                stored += [jobs[at].id for i, at in enumerate(places) if i not in got.existing]
            else:  # an empty reply: every job stored in the queue it was sent to
                stored += [jobs[at].id for at in places]
        if duplicates:  # on a Cluster, other slots' calls may have stored theirs (docs/redis.md)
            raise calls.duplicate(duplicates, stored)
        return EnqueueResult(queues=chosen, existing=dict(sorted(existing.items())))

    def _run_all(self, sent: list[FCall]) -> list[Any]:
        made: list[Call] = [(call.op, call.once, call.keys, call.args) for call in sent]
        try:
            return self.store.run_all(made, replicated=self.store.options.wait_replicas > 0)
        except cluster.NotReplicated as exc:
            raise cluster.NotReplicated(
                f"the jobs are stored, but {exc}: should their master fail now they could be "
                "lost. Check the replicas' links, or raise wait_timeout"
            ) from None

    def _claim(self, jobs: list[NewJob], nonce: str) -> None:
        with self.store.translated():
            self.directory.claim(jobs, nonce)

    def _release(self, jobs: list[NewJob], nonce: str) -> None:
        with self.store.translated():
            self.directory.release_unstored(jobs, nonce)
