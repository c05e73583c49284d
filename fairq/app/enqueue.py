"""From an enqueue call to the store's record of the job (``NewJob``).

What ``App.enqueue``/``enqueue_many`` (and their async twins) check and decide before the one
store call: the job's
declaration (this App's own, else the one a worker published in the store), its arguments
against its signature, its tenant (or the App's fallback tenant), its queue or, for a sharded
queue, the tenant's shards, and the throttle rules that apply.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from fairq.app.declare import Call, JobDefinition, argument, check_priority, run_at
from fairq.app.signatures import check_published_call
from fairq.backends.steps import Steps, drive
from fairq.contract import EnqueueParams, EnqueueResult, JobType
from fairq.errors import ConfigError, MissingTenant, UnknownJob
from fairq.job import NewJob, Unique, encode_payload
from fairq.policy.bounds import check_seconds, check_tenant
from fairq.policy.queues import check_queue_name
from fairq.policy.throttle import Throttle
from fairq.policy.unique import arguments_key, check_key

if TYPE_CHECKING:
    from fairq.app.app import App

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
    payload = encode_payload(call.args, call.kwargs, max_bytes=app.max_payload_bytes)
    unique = unique_of(call, spec.name, definition, bound, payload)
    if unique is not None and rules:
        raise ConfigError(
            f"job {spec.name!r} has throttle rules, and a job with a unique key takes none (a "
            "rule may move it to another queue, where its key is not kept); enqueue it with "
            "queue=… (no rule applies then) or without a unique key"
        )
    return NewJob(
        id=uuid.uuid4().hex,
        name=spec.name,
        queue=shards[0] if shards else queue,
        shards=shards,
        tenant=tenant,
        payload=payload,
        priority=check_priority(opts.priority),
        run_at=run_at(opts, now),
        max_attempts=spec.max_attempts,
        lease_timeout=spec.lease_timeout,
        cost=spec.cost,
        learn_cost=spec.learn_cost,
        throttle=rules,
        headers={} if opts.headers is None else opts.headers,
        unique=unique,
    )


def unique_of(
    call: Call,
    name: str,
    definition: JobDefinition[Any, Any] | None,
    bound: dict[str, Any] | None,
    payload: str,
) -> Unique | None:
    """The call's unique key (docs/unique.md): the key and window given when enqueueing,
    else the declaration's; a window without a key keys the job by its arguments."""
    opts = call.options
    window = opts.unique_for
    if window is None and definition is not None:
        window = definition.unique_for
    key: object = opts.unique_key
    if key is None and window is not None:
        if definition is not None and bound is not None:
            key = definition.unique_key_of(call.args, call.kwargs, bound)
        if key is None:
            key = arguments_key(name, payload)
    if key is None:
        return None
    if window is None:
        raise ConfigError(
            f"job {name!r}: unique_key needs unique_for=… too, how long the key may hold at "
            "most, e.g. unique_for=timedelta(hours=1)"
        )
    return Unique(key=check_key(key), window=check_seconds("unique_for", window))


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


def tenant_for(
    app: App,
    call: Call,
    spec: JobType,
    definition: JobDefinition[Any, Any] | None,
    bound: dict[str, Any] | None,
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
