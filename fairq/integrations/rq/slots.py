"""Tenant slots for RQ jobs that go straight to RQ, without the relay (``@fair.guard(slots=…)``).

Inside the worker, a job runs only while its tenant holds one of its slots in the job's queue
(``Backend.acquire_slot``: atomic in the store; the cap is ``slots=N``, or with ``slots=True``
the tenant's ``max_running`` there). The slot is renewed while the job runs and given back when
it ends or raises; a killed worker's slot frees at its lease. A job with no free slot is
deferred: it waits in its tenant's line in the store, and the worker that releases a slot
enqueues a copy of the oldest waiting job at once (``wake``); a timed copy is also scheduled in
RQ for when a slot's lease ends, in case no release comes (``rq worker --with-scheduler`` moves
it back). No RQ retry spent, nothing lost; copies carry the job's place in line, so only the
first to get a slot runs (fairq/integrations/slots.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from rq import Queue, get_current_job
from rq.job import Job, Retry

from fairq.contract import SlotResult, Woken
from fairq.integrations.rq.router import GuardedTask
from fairq.integrations.slots import SlotKeeper, fallback, turn

log = logging.getLogger("fairq.integrations.rq")

#: ``job.meta`` of a copy scheduled because its tenant had no free slot: how many times so far.
DEFERRED_KEY = "fairq_deferred"
#: ``job.meta`` of a run that deferred its job: the id of the job's timed copy.
DEFERRED_TO_KEY = DEFERRED_KEY + "_to"
#: ``job.meta`` of a waiting job's copies: its place in line, and whether a release woke it.
WAITER_KEY = "fairq_waiter"
WOKEN_KEY = "fairq_woken"
#: The first wait of a deferred job, doubled per deferral up to DEFER_MOST (a slot's own
#: deadline, when sooner, wins): no busy loop, and no long sleep past a slot freed early.
DEFER_FIRST = 0.5
DEFER_MOST = 10.0


def run_in_slot(
    task: GuardedTask,
    keeper: SlotKeeper,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> Any:
    """Run ``fn`` while the job's tenant holds a slot in the job's queue, or defer the job."""
    job = get_current_job()
    if job is None or not task.slots:
        return fn(*args, **kwargs)
    holder = job.worker_name or f"pid-{os.getpid()}"
    tenant = task.tenant(args, kwargs)
    woken = bool(job.meta.get(WOKEN_KEY))
    park = json.dumps({"job": job.id})  # what wake copies the job from
    slot = keeper.acquire(
        job.origin,
        tenant,
        holder,
        task.slot_lease,
        task.limit,
        waiter=job.meta.get(WAITER_KEY),
        park=park,
    )
    verdict = turn(slot, woken)
    if verdict == "drop":
        why = "another copy ran" if slot.gone else "no free slot; back in line"
        log.info("RQ job %s (%s): copy dropped (%s)", job.id, job.func_name, why)
        return None
    if verdict == "defer":
        try:
            defer(job, slot)
        except Exception:  # RQ fails the job as it came (and retries it, if it may)
            if keeper.leave(job.origin, tenant, slot.waiter, job.meta.get(WAITER_KEY)):
                raise
            log.info(
                "RQ job %s (%s): its timed copy was not scheduled, but a woken copy runs it",
                job.id,
                job.func_name,
            )
        return None
    if woken:
        log.info("RQ job %s (%s) started: woken by a freed slot", job.id, job.func_name)
    try:
        return fn(*args, **kwargs)
    finally:
        keeper.release(slot.token)


def defer(job: Job, slot: SlotResult) -> Job:
    """Schedule the timed copy of ``job`` (due as ``fallback`` says); this run ends doing
    nothing."""
    deferrals = int(job.meta.get(DEFERRED_KEY, 0))
    wait = fallback(slot, deferrals, time.time(), DEFER_FIRST, DEFER_MOST)
    meta = {DEFERRED_KEY: deferrals + 1, WAITER_KEY: slot.waiter, WOKEN_KEY: False}
    copy = copy_job(job, meta, datetime.now(timezone.utc) + timedelta(seconds=wait))
    job.meta[DEFERRED_TO_KEY] = copy.id
    job.save_meta()  # type: ignore[no-untyped-call]
    log.info(
        "RQ job %s (%s) deferred: no free slot in %s; waits in line, timed copy %s in %.1f s",
        job.id,
        job.func_name,
        job.origin,
        copy.id,
        wait,
    )
    return copy


def copy_job(job: Job, meta: Mapping[str, Any], at: datetime | None = None) -> Job:
    """A copy of ``job`` in its queue (scheduled ``at``, else now) with ``meta`` added."""
    queue = Queue(job.origin, connection=job.connection, serializer=job.serializer)
    retry = None
    if job.retries_left:
        retry = Retry(max=job.retries_left, interval=job.retry_intervals or 0)
    options: dict[str, Any] = {
        "args": job.args,
        "kwargs": job.kwargs,
        "job_timeout": job.timeout,
        "result_ttl": job.result_ttl,
        "failure_ttl": job.failure_ttl,
        "description": job.description,
        "meta": {**{k: v for k, v in job.meta.items() if k != DEFERRED_TO_KEY}, **meta},
        "retry": retry,
    }
    func = str(job.func_name)
    copy: Job = (
        queue.enqueue(func, **options) if at is None else queue.enqueue_at(at, func, **options)
    )
    return copy


def wake(connection: Any, serializer: Any, woken: Woken) -> None:
    """Enqueue a copy of the job a release woke (its park text names the job to copy)."""
    job = Job.fetch(json.loads(woken.park)["job"], connection=connection, serializer=serializer)
    copy_job(job, {WAITER_KEY: woken.place, WOKEN_KEY: True})
