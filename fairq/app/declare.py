"""What an App declares: jobs, queues, weight callbacks, and the checks on each declaration.

Kept apart from ``fairq.app.app`` (which enqueues and inspects) and ``fairq.app.checks`` (which
checks each enqueue call against these declarations) so each module has one job. Every
check raises ``ConfigError`` (or ``InvalidTenant``) at the call that declared the bad value, with
a message that names the fix: a mistake found at import time is cheaper than one found by a
worker at 3 a.m.
"""

from __future__ import annotations

import functools
import inspect
import string
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from fairq.app import checks
from fairq.app.calls import NO_OPTIONS, Call, Options
from fairq.app.signatures import Binder
from fairq.contract import JobType
from fairq.contract.jobtypes import JobSignature, positional_params
from fairq.errors import ConfigError
from fairq.policy.bounds import (
    check_int,
    check_seconds,
)
from fairq.policy.queues import check_queue_name
from fairq.policy.shards import Sharding, parse_shards, shard_name
from fairq.policy.throttle import Throttle, check_rules


class Enqueuer(Protocol):
    """What a declared job needs of its App: to enqueue calls (one transaction), blocking
    or awaited."""

    def enqueue_many(self, calls: Iterable[Call]) -> list[str]: ...

    async def aenqueue_many(self, calls: Iterable[Call]) -> list[str]: ...


P = ParamSpec("P")
R = TypeVar("R")
TenantRule = str | Callable[..., object] | None
#: A job's unique key from its arguments: a template of argument names (``"{account}:{day}"``)
#: or a callable taking the job's arguments; None: a digest of the arguments as passed.
UniqueRule = str | Callable[..., object] | None
#: ``(tenants with pending work) -> {tenant: weight}``; 0 pauses a tenant.
WeightsFn = Callable[[list[str]], Mapping[str, float]]


@dataclass(frozen=True)
class QueueDeclaration:
    """A queue the app's workers serve: strict ones first, the others drawn by ``weight``.

    ``implicit``: declared only because a job names it as its home queue (weight 1); an explicit
    ``app.queue(...)`` may still set it.
    """

    name: str
    weight: float = 1.0
    strict: bool = False
    implicit: bool = False
    sharding: Sharding | None = None  # shuffle sharding over sub-queues <name>@<i>

    def shards_of(self, tenant: str) -> list[str]:
        """The tenant's shards, best first; none when the queue is not sharded."""
        return [] if self.sharding is None else self.sharding.queues_of(self.name, tenant)

    def served(self, shards: str | None = None) -> list[str]:
        """The queues a worker serves for this one: itself, and every shard when sharded
        (the queue itself still holds jobs of producers that do not know its sharding), or
        only the ``shards`` chosen (``--shards 0-3``, fairq.policy.shards.parse_shards)."""
        if self.sharding is None:
            return [self.name]
        if shards is not None:
            chosen = parse_shards(shards, self.sharding.count, self.name)
            return [shard_name(self.name, i) for i in chosen]
        return [self.name, *self.sharding.queues(self.name)]


def job_rules(
    throttle: object, home: str, queues: Mapping[str, QueueDeclaration]
) -> tuple[Throttle, ...]:
    """A job's throttle rules, checked against the App's queues (every kind of job: the rules
    must be a list, name queues, and not be on a sharded home queue)."""
    if isinstance(throttle, (str, bytes, Throttle)) or not isinstance(throttle, Sequence):
        raise ConfigError(f"throttle must be a list of fairq.Throttle rules, got {throttle!r}")
    rules = check_rules(throttle, home, list(queues))
    declared = queues.get(home)
    if rules and declared is not None and declared.sharding is not None:
        raise ConfigError(
            f"queue {home!r} is sharded, and a sharded queue takes no throttle rules; "
            "drop the rules or give the job another queue"
        )
    return tuple(rules)


def declare_sharding(
    name: str,
    shards: int | None,
    shard_size: int,
    assign: Mapping[str, Sequence[int]] | None,
    jobs: Iterable[JobDefinition[Any, Any]],
    strict: bool = False,
) -> Sharding | None:
    """``App.queue``'s sharding settings, checked; None when the queue is not sharded."""
    if shards is None and assign is None:
        return None
    if strict:
        raise ConfigError(
            f"queue {name!r} cannot be both strict and sharded: a worker serving several "
            "shards would always empty the first before the next; give it a weight instead"
        )
    if shards is None:
        raise ConfigError(f"queue {name!r}: assign needs shards=n too, e.g. shards=8")
    throttled = [job.name for job in jobs if job.queue == name and job.throttle]
    if throttled:
        raise ConfigError(
            f"queue {name!r} cannot be sharded: jobs {throttled} have throttle rules on it, "
            "and a sharded queue takes no throttle rules"
        )
    return Sharding(shards, shard_size, assign if assign is not None else {})


@dataclass
class TenantWeights:
    """A registered ``@app.tenant_weights`` callback and its per-process cache.

    ``last_called`` (by the app's clock) keeps the callback to one call per ``every`` seconds
    however many workers of this process serve the queue; ``last_good`` is the last result that
    passed the checks, which stays in force when a later call fails.
    """

    queue: str
    fn: WeightsFn
    every: float
    last_called: float | None = None
    last_good: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class JobDefinition(Generic[P, R]):
    """A declared job. Call it to run it here; ``.enqueue(...)`` to run it on a worker."""

    def __init__(
        self,
        app: Enqueuer,
        fn: Callable[P, R],
        *,
        name: str,
        queue: str,
        tenant: TenantRule,
        max_attempts: int,
        lease: float | timedelta,
        cost: float | timedelta,
        retry_base: float | timedelta,
        learn_cost: bool = True,
        throttle: Sequence[Throttle] = (),
        signature: inspect.Signature | None = None,  # the arguments enqueue takes: fn's own
        result_ttl: float | timedelta | None = None,
        unique_for: float | timedelta | None = None,
        unique_key: UniqueRule = None,
    ) -> None:
        if signature is None and (
            inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
        ):
            raise ConfigError(
                f"job {name!r} is a generator function: as a plain job, calling it would run "
                "none of its items; declare it with @app.iterative_job (docs/iteration.md)"
            )
        self.app = app
        self.fn = fn
        self.name = name
        self.queue = check_queue_name(queue)
        self.signature = inspect.signature(fn) if signature is None else signature
        self.binder = Binder(self.signature)
        self.tenant_rule = check_tenant_rule(tenant, self.signature, name)
        self.max_attempts = check_int("max_attempts", max_attempts)
        self.lease_timeout = check_seconds("lease", lease)
        self.cost = check_seconds("cost", cost)
        if not isinstance(learn_cost, bool):
            raise ConfigError(f"learn_cost must be True or False, got {learn_cost!r}")
        #: False: its jobs are always charged ``cost``, never the learned run time.
        self.learn_cost = learn_cost
        self.retry_base = check_seconds("retry_base", retry_base)
        self.throttle = tuple(throttle)
        #: Seconds the return value is kept with the succeeded job (fairq/results.py); None:
        #: not kept.
        self.result_ttl = None if result_ttl is None else check_seconds("result_ttl", result_ttl)
        self.unique_for, self.unique_key = check_unique(
            unique_for, unique_key, self.signature, name, self.throttle
        )
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        """A call to pass to ``App.enqueue_many``."""
        return Call(self.name, args, kwargs, NO_OPTIONS)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return self.app.enqueue_many([self.call(*args, **kwargs)])[0]

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """``enqueue`` for asyncio code: the same checks and errors, the store awaited."""
        return (await self.app.aenqueue_many([self.call(*args, **kwargs)]))[0]

    def options(self, **options: Any) -> BoundOptions[P]:
        """Override tenant, queue, delay, run_at, priority, headers, unique_key or unique_for:
        ``job.options(delay=60)``, ``job.options(unique_key="sync:acme", unique_for=600)``."""
        return BoundOptions(self, Options(**options))

    def check_arguments(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Refuse a call that could never run on a worker; else its arguments by parameter
        name, defaults filled in (fairq.app.checks.bind)."""
        return checks.bind(self, args, kwargs)

    def tenant_of(
        self, args: Sequence[Any], kwargs: dict[str, Any], bound: Mapping[str, Any]
    ) -> object:
        """The tenant its rule finds in a call's arguments (fairq.app.checks.rule_tenant)."""
        return checks.rule_tenant(self, args, kwargs, bound)

    @functools.cached_property
    def job_type(self) -> JobType:
        """As published; built once (a declaration does not change), not once per enqueue."""
        return JobType(
            name=self.name,
            queue=self.queue,
            tenant_arg=self.tenant_rule if isinstance(self.tenant_rule, str) else None,
            params=positional_params(self.signature),
            signature=JobSignature.of(self.signature),
            max_attempts=self.max_attempts,
            lease_timeout=self.lease_timeout,
            cost=self.cost,
            throttle=self.throttle,
            learn_cost=self.learn_cost,
        )


class BoundOptions(Generic[P]):
    def __init__(self, definition: JobDefinition[P, Any], options: Options) -> None:
        self.definition = definition
        self._options = options

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        return Call(self.definition.name, args, kwargs, self._options)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return self.definition.app.enqueue_many([self.call(*args, **kwargs)])[0]

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return (await self.definition.app.aenqueue_many([self.call(*args, **kwargs)]))[0]


# -- checks ---------------------------------------------------------------------------------


def check_tenant_rule(rule: TenantRule, signature: inspect.Signature, name: str) -> TenantRule:
    if rule is None or callable(rule):
        return rule
    if not isinstance(rule, str):
        raise ConfigError(f"tenant= must be an argument name or a callable, got {rule!r}")
    if rule not in signature.parameters:
        raise ConfigError(
            f"job {name!r} takes no argument {rule!r} to find its tenant in; "
            f"its arguments are: {', '.join(signature.parameters) or '(none)'}"
        )
    return rule


def check_unique(
    unique_for: object,
    unique_key: UniqueRule,
    signature: inspect.Signature,
    name: str,
    throttle: Sequence[Throttle],
) -> tuple[float | None, UniqueRule]:
    """A declaration's unique window and key rule, checked (ConfigError naming the fix)."""
    if unique_for is None:
        if unique_key is not None:
            raise ConfigError(
                f"job {name!r}: unique_key needs unique_for=… too, how long a key may hold at "
                "most, e.g. unique_for=timedelta(hours=1)"
            )
        return None, None
    window = check_seconds(f"job {name!r}: unique_for", unique_for)
    if throttle:
        raise ConfigError(
            f"job {name!r}: a job with a unique key takes no throttle rules (a rule may move "
            "it to another queue, where its key is not kept); drop one of the two"
        )
    if unique_key is None or callable(unique_key):
        return window, unique_key
    if not isinstance(unique_key, str):
        raise ConfigError(
            f"job {name!r}: unique_key must be a template of argument names such as "
            f"'{{account}}:{{day}}', or a callable, got {unique_key!r}"
        )
    try:
        fields = {field for _, field, _, _ in string.Formatter().parse(unique_key) if field}
    except ValueError as exc:
        raise ConfigError(
            f"job {name!r}: unique_key {unique_key!r} is not a template: {exc}"
        ) from None
    unknown = sorted(f for f in fields if f.split(".")[0].split("[")[0] not in signature.parameters)
    if unknown:
        raise ConfigError(
            f"job {name!r}: unique_key {unique_key!r} names {', '.join(unknown)}, not arguments "
            f"of the job; its arguments are: {', '.join(signature.parameters) or '(none)'}"
        )
    return window, unique_key
