"""The directory: which queue holds a job id. It routes an id (a lease token's, a lookup's) to
its queue and keeps ids unique across the store. ``Directory.locate`` is the one way to find a
job's queue by its id alone: every operation by id goes through it.

On a single Redis the directory is one hash, ``{prefix}:dir`` (id -> queue), and enqueue.lua
enters the ids in the same call that stores the jobs, all or none (maintain.lua takes pruned
ids out in the call that prunes them). On a Redis Cluster a script touches one slot only, and a
job lives in its queue's slot while its id may be looked up by anyone, so the directory is
split into hashes by a hash of the id (``Layout.directory_key``) and written in two steps:

* ``claim`` enters every id of a batch (HSETNX, pipelined over the nodes) before anything is
  stored, with the queues the job may go to (its own, its shards, or a throttle rule's queues)
  and a nonce of the call. An id already entered under another nonce is a duplicate: the ids
  this call entered are taken out again and nothing is stored. One entered under our own nonce
  is our own claim, sent again by redis-py after a lost reply. A job with a unique key whose id
  is entered for one of its own queues is left to enqueue.lua, as on a single Redis: if its key
  is held it is not stored (and its id not checked), else the id stored in that queue refuses
  the call (DuplicateJob).
* enqueue.lua then stores the jobs, one call per slot; if that fails, ``release_unstored``
  takes out the claims of the jobs that were not stored (and of the jobs whose unique key
  was held).
* after maintain.lua prunes jobs, ``forget`` takes their ids out.

What the split gives up, only when a node fails between the two steps: a claim whose job was
never stored (and whose release failed too) keeps its id taken, so an enqueue with that id is
refused as a duplicate (fairq's own ids are fresh UUIDs and never reused); a pruned job's id
whose ``forget`` failed stays taken. Neither loses or duplicates a job.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

from fairq.job import NewJob

from .calls import duplicate
from .cluster import NotReplicated, Send
from .plumbing import Store
from .records import text
from .steps import Batch, RedisSteps


def candidates(job: NewJob) -> tuple[str, ...]:
    """Every queue a job may be stored in: its shards, or its queue and its throttle rules'."""
    if job.shards:
        return tuple(job.shards)
    return tuple(dict.fromkeys([job.queue, *(rule.queue for rule in job.throttle)]))


class Directory:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.client: Any = store.client
        self.layout = store.layout

    # -- a Cluster's claims -------------------------------------------------------------

    @staticmethod
    def nonce() -> str:
        """A new call's nonce: what marks its claims as its own."""
        return os.urandom(8).hex()

    def claim(self, jobs: Sequence[NewJob], nonce: str) -> None:
        """Enter every job's id with the queues it may go to, or none (DuplicateJob)."""
        sends: list[Send] = []
        for job in jobs:
            key, value = self.layout.directory_key(job.id), f"{nonce}:{' '.join(candidates(job))}"
            sends.append((key, ("HSETNX", key, job.id, value)))
        if self.store.options.wait_replicas:  # claims a failover could lose break uniqueness
            try:
                replies = self.store.replicated(sends)
            except NotReplicated as exc:
                with contextlib.suppress(Exception):  # best effort
                    self.release_unstored(jobs, nonce)
                raise NotReplicated(
                    f"nothing was stored: {exc} (the claims of the jobs' ids); check the "
                    "replicas' links, or raise wait_timeout"
                ) from None
        else:
            replies = self.store.per_master(sends)
        taken = [job.id for job, new in zip(jobs, replies, strict=True) if not new]
        if not taken:
            return
        held = self._values(taken)
        by_id = {job.id: job for job in jobs}
        duplicates = [
            i for i in taken if _nonce_of(held[i]) != nonce and not _left(by_id[i], held[i])
        ]
        if duplicates:
            refused = {i for i in taken if _nonce_of(held[i]) != nonce}  # not ours to release
            self.release([job.id for job in jobs if job.id not in refused])
            raise duplicate(duplicates)

    def release(self, ids: Iterable[str]) -> None:
        """Take ids out (this call's claims, or the ids of jobs pruned)."""
        pipe = self.client.pipeline(transaction=False)
        count = 0
        for job_id in ids:
            pipe.hdel(self.layout.directory_key(job_id), job_id)
            count += 1
        if count:
            pipe.execute()

    def release_unstored(self, jobs: Sequence[NewJob], nonce: str) -> None:
        """After a failed store: take out this call's claims (``nonce``) of the jobs no queue
        holds. A claim stays ours until we take it out (no one else can enter an id that is
        entered), so reading it and then deleting it races with nobody."""
        values = self._values([job.id for job in jobs])
        ours = [job for job in jobs if _nonce_of(values[job.id]) == nonce]
        stored = self._holders({job.id: candidates(job) for job in ours})
        self.release(job.id for job in ours if job.id not in stored)

    # -- lookups --------------------------------------------------------------------------

    def locate(self, ids: Sequence[str]) -> dict[str, str]:
        """The queue of each id found (an id no queue holds is left out): the one helper for
        every operation by job id."""
        return self.store.drive(self.locate_steps(ids))

    def locate_steps(self, ids: Sequence[str]) -> RedisSteps[dict[str, str]]:
        """``locate`` as steps (fairq.backends.steps)."""
        if not ids:
            return {}
        if not self.layout.cluster:
            (found,) = yield Batch(lambda pipe: pipe.hmget(self.layout.directory, list(ids)))
            return {i: text(q) for i, q in zip(ids, found, strict=True) if q is not None}
        values = yield from self._values_steps(ids)
        single: dict[str, str] = {}
        several: dict[str, tuple[str, ...]] = {}
        for job_id, value in values.items():
            if value is None:
                continue
            queues = tuple(value.partition(":")[2].split())
            if len(queues) == 1:
                single[job_id] = queues[0]
            else:
                several[job_id] = queues
        if not several:
            return single
        return {**single, **(yield from self._holders_steps(several))}

    def _values(self, ids: Sequence[str]) -> dict[str, str | None]:
        return self.store.drive(self._values_steps(ids))

    def _values_steps(self, ids: Sequence[str]) -> RedisSteps[dict[str, str | None]]:
        def fill(pipe: Any) -> None:
            for job_id in ids:
                pipe.hget(self.layout.directory_key(job_id), job_id)

        found = yield Batch(fill)
        return {i: None if v is None else text(v) for i, v in zip(ids, found, strict=True)}

    def _holders(self, ids: dict[str, tuple[str, ...]]) -> dict[str, str]:
        return self.store.drive(self._holders_steps(ids))

    def _holders_steps(self, ids: dict[str, tuple[str, ...]]) -> RedisSteps[dict[str, str]]:
        """Which of its queues holds each id (an id none holds is left out)."""
        asked = [(job_id, queue) for job_id, queues in ids.items() for queue in queues]
        if not asked:
            return {}

        def fill(pipe: Any) -> None:
            for job_id, queue in asked:
                pipe.hexists(self.layout.queue_key(queue, "jobs"), job_id)

        found: dict[str, str] = {}
        for (job_id, queue), present in zip(asked, (yield Batch(fill)), strict=True):
            if present:
                found.setdefault(job_id, queue)
        return found


def _left(job: NewJob, value: str | None) -> bool:
    """Whether a job whose id is entered by another call is left to enqueue.lua to decide: a
    job with a unique key whose id is entered for one of its own queues (module docstring)."""
    if job.unique is None or value is None:
        return False
    return bool(set(candidates(job)) & set(value.partition(":")[2].split()))


def _nonce_of(value: str | None) -> str | None:
    return None if value is None else value.partition(":")[0]
