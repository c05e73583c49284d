"""One enqueue call checked against its job's declaration, in one pass (``new_job``).

Everything ``App.enqueue``/``enqueue_many`` (and their async twins) check and decide for a call
before the one store call: the call's arguments bound once to the job's signature (this App's
own declaration), or checked against the signature its workers published; its tenant (given,
found by the declaration's rule in the bound arguments, or the App's fallback tenant); its
queue or, for a sharded queue, the tenant's shards; the throttle rules that apply; its unique
key; its priority and when it runs. Each bad value raises at the enqueue, one line naming the
fix. The declaration is read here, not asked: ``fairq.app.declare`` only declares.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fairq.app.calls import Call, Options
from fairq.app.signatures import check_published_call
from fairq.contract import JobType
from fairq.errors import ConfigError, JobArgumentsError, MissingTenant
from fairq.job import NewJob, Unique, encode_payload
from fairq.policy.bounds import MAX_INT, check_int, check_seconds, check_tenant, seconds
from fairq.policy.queues import check_queue_name
from fairq.policy.throttle import Throttle
from fairq.policy.unique import arguments_key, check_key

if TYPE_CHECKING:
    from fairq.app.app import App
    from fairq.app.declare import JobDefinition, TenantRule

log = logging.getLogger("fairq")


def new_job(app: App, call: Call, spec: JobType, now: float) -> NewJob:
    """The store's record of one enqueue call of the job ``spec`` declares (this App's own
    declaration when it has one, else the one published in the store), checked in one pass."""
    definition = app.jobs.get(spec.name)
    args, kwargs, opts = call.args, call.kwargs, call.options
    bound: dict[str, Any] | None = None
    if definition is not None:
        bound = bind(definition, args, kwargs)
    elif not check_published_call(spec.name, spec.params, spec.signature, args, kwargs):
        log.warning(
            "job %r: its arguments could not be checked against its signature (this App "
            "does not declare it, and its published declaration, from an older fairq, "
            "lacks it); arguments that do not fit make the job fail when it runs",
            spec.name,
            extra={"action": "arguments_unchecked"},
        )
    queue = check_queue_name(opts.queue) if opts.queue is not None else spec.queue
    found: object = opts.tenant
    if found is None:
        found = (
            published_tenant(spec, args, kwargs)
            if definition is None or bound is None
            else rule_tenant(definition, args, kwargs, bound)
        )
    tenant, fallback = tenant_or_fallback(app, spec.name, found)
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
    payload = encode_payload(args, kwargs, max_bytes=app.max_payload_bytes)
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
        priority=check_int("priority", opts.priority, least=-MAX_INT - 1),
        run_at=run_at(opts, now),
        max_attempts=spec.max_attempts,
        lease_timeout=spec.lease_timeout,
        cost=spec.cost,
        learn_cost=spec.learn_cost,
        throttle=rules,
        headers={} if opts.headers is None else opts.headers,
        unique=unique,
    )


def bind(
    definition: JobDefinition[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Refuse at enqueue a call that could never run on a worker; else its arguments by
    parameter name, defaults filled in."""
    try:
        return definition.binder.bind(args, kwargs)
    except TypeError as exc:
        raise JobArgumentsError(f"arguments do not fit job {definition.name!r}: {exc}") from None


def rule_tenant(
    definition: JobDefinition[Any, Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    bound: Mapping[str, Any],
) -> object:
    """The tenant the declaration's rule finds in a call's arguments (``bound``: them by
    name, from ``bind``)."""
    return tenant_by_rule(
        definition.tenant_rule,
        f"job {definition.name!r}",
        args,
        kwargs,
        lambda: bound,
        or_else=", or the tenant itself (tenant=… when enqueueing)",
    )


def tenant_by_rule(
    rule: TenantRule,
    what: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    bound: Callable[[], Mapping[str, Any]],
    *,
    or_else: str = "",
) -> object:
    """Which tenant a call belongs to by its declaration's ``rule``, for the App and the
    Celery tasks alike (None: no rule, or it finds none). A tenant function gets the call's
    arguments as they were passed (MissingTenant naming ``what`` and the cause when it
    raises); an argument name is read from them by name (``bound()``: called only then).
    ``or_else``: how else the caller may give the tenant, for that message."""
    if rule is None:
        return None
    if callable(rule):
        try:
            return rule(*args, **kwargs)
        except Exception as exc:
            raise MissingTenant(
                f"{what} has no tenant: its tenant function raised {type(exc).__name__}: "
                f"{exc}; pass arguments it can read the tenant from{or_else}"
            ) from exc
    return bound().get(rule)


def published_tenant(spec: JobType, args: Sequence[Any], kwargs: dict[str, Any]) -> object:
    """The tenant argument of a published job (no function to bind against)."""
    name = spec.tenant_arg
    if name is None:
        return None
    if name in kwargs:
        return kwargs[name]
    positional = list(spec.params)
    if name in positional:
        index = positional.index(name)
        if index < len(args):
            return args[index]
    return None


def tenant_or_fallback(app: App, name: str, found: object) -> tuple[str, bool]:
    """The job's tenant, checked, and whether it is the App's fallback tenant (``found``
    is None or empty)."""
    if found is None or found == "":
        if app.fallback_tenant is None:
            raise MissingTenant(
                f"job {name!r} has no tenant: pass tenant=… when enqueueing, declare "
                "@app.job(tenant='arg_name'), or set App(fallback_tenant=…)"
            )
        log.warning("job %r has no tenant; using fallback tenant %r", name, app.fallback_tenant)
        return app.fallback_tenant, True
    return check_tenant(found), False


def unique_of(
    call: Call,
    name: str,
    definition: JobDefinition[Any, Any] | None,
    bound: Mapping[str, Any] | None,
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
            key = declared_key(definition, call.args, call.kwargs, bound)
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


def declared_key(
    definition: JobDefinition[Any, Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    bound: Mapping[str, Any],
) -> object:
    """The unique key the declaration's rule makes of a call (None: no rule, the arguments'
    digest)."""
    rule = definition.unique_key
    if rule is None:
        return None
    what = "function" if callable(rule) else f"template {rule!r}"
    try:
        key = rule(*args, **kwargs) if callable(rule) else rule.format_map(bound)
    except Exception as exc:  # a template's {arg.attr} or {arg[i]} may fail as well
        raise ConfigError(
            f"job {definition.name!r}: its unique_key {what} raised {type(exc).__name__}: "
            f"{exc}; pass arguments it can read the key from, or unique_key=… when enqueueing"
        ) from exc
    if key is None:  # silently keying by the arguments instead would hide the mistake
        raise ConfigError(
            f"job {definition.name!r}: its unique_key function returned None; return the key "
            "(a str), or enqueue with unique_key=… to name it"
        )
    return key


def run_at(opts: Options, now: float) -> float:
    if opts.delay is not None and opts.run_at is not None:
        raise ConfigError("give delay or run_at, not both")
    if opts.delay is not None:
        delay = seconds("delay", opts.delay)
        if not 0 <= delay < float("inf"):
            raise ConfigError(f"delay must be a non-negative number of seconds, got {delay!r}")
        return now + delay
    if opts.run_at is not None:
        if isinstance(opts.run_at, datetime):
            if opts.run_at.tzinfo is None:
                raise ConfigError("run_at must be timezone-aware (e.g. datetime.now(timezone.utc))")
            return opts.run_at.timestamp()
        if isinstance(opts.run_at, bool) or not isinstance(opts.run_at, (int, float)):
            raise ConfigError(f"run_at must be a datetime or epoch seconds, got {opts.run_at!r}")
        if not math.isfinite(opts.run_at):
            raise ConfigError(f"run_at must be a finite number of epoch seconds, got {opts.run_at}")
        return float(opts.run_at)
    return now
