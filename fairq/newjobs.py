"""From an enqueue call to the store's record of the job (``NewJob``).

What ``App.enqueue``/``enqueue_many`` (and their async twins) check and decide before the one
store call: the job's
declaration (this App's own, else the one a worker published in the store), its arguments
against its signature, its tenant (or the App's fallback tenant), its queue or, for a sharded
queue, the tenant's shards, and the throttle rules that apply.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from fairq.backends.steps import Steps
from fairq.contract import EnqueueParams, EnqueueResult, JobType
from fairq.declare import Call, JobDefinition, argument, check_priority, run_at
from fairq.errors import MissingTenant, UnknownJob
from fairq.job import NewJob, encode_payload
from fairq.policy.bounds import check_tenant
from fairq.policy.queues import check_queue_name
from fairq.policy.throttle import Throttle
from fairq.signatures import check_published_call

if TYPE_CHECKING:
    from fairq.app import App

log = logging.getLogger("fairq")


def new_job(app: App, call: Call, spec: JobType, now: float) -> NewJob:
    """The store's record of one enqueue call: its declaration's settings, checked arguments,
    tenant, queue (or shards) and throttle rules."""
    definition = app.jobs.get(spec.name)
    bound = None if definition is None else definition.check_arguments(call.args, call.kwargs)
    if definition is None and not check_published_call(
        spec.name, spec.params, spec.signature, call.args, call.kwargs
    ):
        log.warning(
            "job %r: its arguments could not be checked against its signature (this App "
            "does not declare it, and its published declaration, from an older fairq, "
            "lacks it); arguments that do not fit make the job fail when it runs",
            spec.name,
            extra={"action": "arguments_unchecked"},
        )
    opts = call.options
    queue = check_queue_name(opts.queue) if opts.queue is not None else spec.queue
    tenant, fallback = tenant_for(app, call, spec, definition, bound)
    rules: Sequence[Throttle] = ()
    if spec.throttle and opts.queue is None:  # an explicit queue is never overridden
        if fallback:
            log.warning(
                "job %r has no tenant of its own: its throttle rules are not applied",
                spec.name,
                extra={"action": "throttle_skipped"},
            )
        else:
            rules = spec.throttle
    declared = app.queues.get(queue)
    shards = () if declared is None or declared.sharding is None else (
        declared.sharding.queues_of(queue, tenant))  # fmt: skip
    return NewJob(
        id=uuid.uuid4().hex,
        name=spec.name,
        queue=shards[0] if shards else queue,
        shards=shards,
        tenant=tenant,
        payload=encode_payload(call.args, call.kwargs, max_bytes=app.max_payload_bytes),
        priority=check_priority(opts.priority),
        run_at=run_at(opts, now),
        max_attempts=spec.max_attempts,
        lease_timeout=spec.lease_timeout,
        cost=spec.cost,
        throttle=rules,
        headers={} if opts.headers is None else opts.headers,
    )


class JobTypesWanted:
    """``enqueueing``'s request for the job types published in the store."""


#: The one request for the published job types (the reply: ``Backend.job_types()``'s).
JOB_TYPES = JobTypesWanted()
#: What ``enqueueing`` asks of the store: the published job types, or to enqueue.
Wanted = JobTypesWanted | EnqueueParams


def enqueueing(app: App, calls: Iterable[Call]) -> Steps[Wanted, list[str]]:
    """``App.enqueue_many`` and ``aenqueue_many``, written once (fairq.backends.steps): the
    checks, the ``before_enqueue``/``after_enqueue`` hooks, the store asked for the published
    job types when some name is not declared here and then to enqueue; the jobs' ids."""
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
    """``jobs`` offered to the ``before_enqueue`` hooks, enqueued at ``now``, and reported to
    the ``after_enqueue`` hooks; their ids."""
    if jobs:
        hooks = app.hooks
        jobs = list(hooks.before_enqueue(jobs))
        try:
            result: EnqueueResult = yield EnqueueParams(jobs=jobs, now=now)
        except BaseException as exc:
            hooks.after_enqueue(jobs, None, exc)
            raise
        chosen = result.queues
        hooks.after_enqueue(jobs, chosen, None)
        for job, went in zip(jobs, chosen, strict=True):
            if went != job.queue:
                log.debug(
                    "job %s %s of tenant %r throttled: sent to queue %r instead of %r",
                    job.id,
                    job.name,
                    job.tenant,
                    went,
                    job.queue,
                    extra={"action": "throttled", "job_id": job.id, "queue": went},
                )
    return [job.id for job in jobs]


def performed(app: App, wanted: Wanted) -> Any:
    """What ``enqueueing`` asks, performed by the App's (timed) blocking store."""
    if isinstance(wanted, EnqueueParams):
        return app.timed_backend.enqueue(wanted)
    return app.timed_backend.job_types()


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


def tenant_for(
    app: App,
    call: Call,
    spec: JobType,
    definition: JobDefinition[Any, Any] | None,
    bound: inspect.BoundArguments | None,
) -> tuple[str, bool]:
    """The job's tenant, and whether it is the fallback tenant. ``definition`` and
    ``bound`` (the call's arguments bound to it): the job as declared here, if it is."""
    found: object = call.options.tenant
    if found is None:
        if definition is not None and bound is not None:
            found = definition.tenant_of(call.args, call.kwargs, bound)
        elif spec.tenant_arg is not None:
            found = argument(spec, call.args, call.kwargs)
    if found is None or found == "":
        if app.fallback_tenant is None:
            raise MissingTenant(
                f"job {spec.name!r} has no tenant: pass tenant=… when enqueueing, declare "
                "@app.job(tenant='arg_name'), or set App(fallback_tenant=…)"
            )
        log.warning(
            "job %r has no tenant; using fallback tenant %r", spec.name, app.fallback_tenant
        )
        return app.fallback_tenant, True
    return check_tenant(found), False
