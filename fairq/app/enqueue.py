"""The enqueue operation, written once for ``App.enqueue_many`` and ``aenqueue_many``
(fairq.backends.steps): the declarations the calls need (the store asked for the published
ones only when some name is not declared here), each call checked in one pass
(fairq/app/checks.py), then one store call through the seam's hooks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from fairq.app.calls import Call
from fairq.app.checks import new_job
from fairq.backends.steps import Steps, drive
from fairq.contract import EnqueueParams, EnqueueResult, JobType
from fairq.errors import UnknownJob
from fairq.job import NewJob

if TYPE_CHECKING:
    from fairq.app.app import App

log = logging.getLogger("fairq")


class JobTypesWanted:
    """``enqueueing``'s request for the job types published in the store."""


#: The one request for the published job types (the reply: ``Backend.job_types()``'s).
JOB_TYPES = JobTypesWanted()
#: What ``enqueueing`` asks of the store: the published job types, or to enqueue.
Wanted = JobTypesWanted | EnqueueParams


def enqueueing(app: App, calls: Iterable[Call]) -> Steps[Wanted, list[str]]:
    """``App.enqueue_many`` and ``aenqueue_many``, written once (fairq.backends.steps): the
    checks, the store asked for the published job types when some name is not declared here,
    then ``stored``; each job's id, or for a job whose unique key was held, the holder's."""
    jobs, now = yield from prepared(app, calls)
    return (yield from stored(app, jobs, now))


def prepared(app: App, calls: Iterable[Call]) -> Steps[Wanted, tuple[list[NewJob], float]]:
    """The jobs of ``calls``, checked, with the time they were made at (``app.clock()``):
    everything before the store is offered them (which ``stored`` does)."""
    now = app.clock()
    calls = list(calls)
    specs = yield from job_types(app, [call.name for call in calls])
    jobs = [new_job(app, call, spec, now) for call, spec in zip(calls, specs, strict=True)]
    return jobs, now


def stored(app: App, jobs: list[NewJob], now: float) -> Steps[Wanted, list[str]]:
    """Store ``jobs`` with one store call (``storing``); the id of each, or for a job whose
    unique key was held, the id of the job holding it."""
    if not jobs:
        return []
    existing = (yield from storing(app, jobs, now)).existing
    return [existing.get(i, job.id) for i, job in enumerate(jobs)]


def store(app: App, jobs: list[NewJob], now: float) -> EnqueueResult:
    """``storing`` with the App's blocking store (the periodic scheduler's enqueues)."""
    return drive(storing(app, jobs, now), partial(performed, app))


def performed(app: App, wanted: Wanted) -> Any:
    """What ``enqueueing`` asks, performed by the App's (timed) blocking store."""
    if isinstance(wanted, EnqueueParams):
        return app.timed_backend.enqueue(wanted)
    return app.timed_backend.job_types()


def storing(app: App, jobs: list[NewJob], now: float) -> Steps[Wanted, EnqueueResult]:
    """Store ``jobs`` with one store call, through the seam's hooks (the hooks after the
    call see only the jobs stored: not those whose unique key was held)."""
    hooks = app.hooks
    jobs = list(hooks.before_enqueue(jobs))
    try:
        result: EnqueueResult = yield EnqueueParams(jobs=jobs, now=now)
    except BaseException as exc:
        hooks.after_enqueue(jobs, None, exc)
        raise
    existing = result.existing
    went = list(zip(jobs, result.queues, strict=True))
    stored = [pair for i, pair in enumerate(went) if i not in existing] if existing else went
    hooks.after_enqueue([job for job, _ in stored], [queue for _, queue in stored], None)
    for job, queue in stored:
        if queue != job.queue:
            log.debug(
                "job %s %s of tenant %r throttled: sent to queue %r instead of %r",
                job.id,
                job.name,
                job.tenant,
                queue,
                job.queue,
                extra={"action": "throttled", "job_id": job.id, "queue": queue},
            )
    for i, holder in existing.items():
        log.debug(
            "job %s of tenant %r not stored: its unique key is held by job %s",
            jobs[i].name,
            jobs[i].tenant,
            holder,
            extra={"action": "unique_held", "job_id": holder, "queue": went[i][1]},
        )
    return result


def job_types(app: App, names: Sequence[str]) -> Steps[Wanted, list[JobType]]:
    """Each name's declaration: this app's own, else the store's published ones (read once
    per batch, and only when some name is not declared here)."""
    published: dict[str, JobType] | None = None
    found: list[JobType] = []
    for name in names:
        if name in app.jobs:
            found.append(app.jobs[name].job_type)
            continue
        if published is None:
            published = yield JOB_TYPES
        if name not in published:
            known = sorted(set(app.jobs) | set(published)) or ["(none)"]
            raise UnknownJob(
                f"no job named {name!r} is declared; known jobs: {', '.join(known)}. "
                "A worker publishes its app's jobs when it starts (or call App.publish())."
            )
        found.append(published[name])
    return found
