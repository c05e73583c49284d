"""Periodic jobs: cron schedules declared on an App (docs/periodic.md).

A ``Schedule`` enqueues one job per tick of its cron expression (croniter, extra
``fairq[cron]``), for one tenant. Every worker serving the job's queue runs the schedules
(fairq/worker/periodic.py), so ticks go on as long as one worker is up; the store keeps each
tick to one job however many try: the job takes a unique key naming the tick that holds for
its whole window (``Unique(hold=True)``, fairq/policy/unique.py), so every other enqueue of
the tick gets that job's id, even once it has finished. Its id names the tick too
(``job_id``), which is how ``fairq stats`` finds a schedule's last job.

Ticks are UTC unless a ``timezone`` is given. A tick is enqueued only while it is the latest
and at most ``misfire_grace`` old (default: until the next tick is due); older ticks, missed
while no worker ran, are dropped and counted in a log line.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from fairq.errors import ConfigError
from fairq.job import Unique, encode_payload
from fairq.policy.bounds import check_seconds, check_tenant

if TYPE_CHECKING:
    from fairq.app.declare import JobDefinition

#: How much longer than its grace a tick's key holds: room for the clocks of workers and
#: store to disagree, so a late worker still finds the key.
KEY_MARGIN = 60.0


@dataclass(frozen=True)
class Schedule:
    """One job enqueued per tick of ``cron`` for ``tenant`` (``App.periodic``/``App.schedule``)."""

    name: str
    job: str
    cron: str
    tenant: str
    queue: str  # the job's home queue, named explicitly when enqueueing: no throttle rule applies
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    misfire_grace: float | None = None  # None: a tick may be enqueued until the next is due
    timezone: str | None = None  # None: UTC

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.name.encode()).hexdigest()[:16]

    def job_id(self, tick: float) -> str:
        """The id of the job of ``tick`` (and its unique key): the schedule and the tick."""
        return f"periodic:{self.digest}:{int(tick)}"

    def tick_of(self, job_id: str) -> float | None:
        prefix = f"periodic:{self.digest}:"
        if not job_id.startswith(prefix):
            return None
        return float(job_id[len(prefix) :])

    def latest(self, now: float) -> float:
        """The latest tick at or before ``now``."""
        before = float(self._iter(now).get_prev(float))
        at = float(self._iter(before).get_next(float))
        return at if at <= now else before

    def following(self, tick: float) -> float:
        """The first tick after ``tick``."""
        return float(self._iter(tick).get_next(float))

    def previous(self, tick: float, count: int) -> list[float]:
        """Up to ``count`` ticks before ``tick``, newest first."""
        found = self._iter(tick)
        return [float(found.get_prev(float)) for _ in range(count)]

    def grace(self, tick: float) -> float:
        """How long after ``tick`` it may still be enqueued: ``misfire_grace``, and never once
        the next tick is due."""
        until_next = self.following(tick) - tick
        return until_next if self.misfire_grace is None else min(self.misfire_grace, until_next)

    def unique(self, tick: float) -> Unique:
        """The tick's key: held for its whole window, longer than anyone may enqueue it."""
        return Unique(key=self.job_id(tick), window=self.grace(tick) + KEY_MARGIN, hold=True)

    def _iter(self, start: float) -> Any:
        croniter = _croniter()
        zone = _zone(self.timezone)
        at: float | datetime = start if zone is None else datetime.fromtimestamp(start, zone)
        return croniter(self.cron, at)


def declare_schedules(
    jobs: Mapping[str, JobDefinition[Any, Any]],
    job: object,
    cron: object,
    *,
    tenant: object,
    tenants: Sequence[object] | None,
    fallback_tenant: str | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    name: str | None,
    misfire_grace: float | timedelta | None,
    timezone: str | None,
    max_payload_bytes: int,
    declared: Mapping[str, Schedule],
) -> list[Schedule]:
    """The schedules of one declaration of ``job`` (one of ``jobs``, or its name), each
    checked (ConfigError naming the fix): a valid cron expression, arguments the job takes
    (JSON), a tenant for each, a name no schedule in ``declared`` has."""
    wanted = job if isinstance(job, str) else getattr(job, "name", None)
    definition = jobs.get(wanted) if isinstance(wanted, str) else None
    if definition is None or not (isinstance(job, str) or definition is job):
        raise ConfigError(
            f"schedule: {job!r} is not a job declared on this App; declare it with "
            "@app.job first (put @app.periodic above @app.job)"
        )
    label = f"periodic job {definition.name!r}"
    if tenant is not None:
        if tenants is not None:
            raise ConfigError(f"{label}: give tenant=… or tenants=[…], not both")
        tenants = [tenant]
    if not isinstance(cron, str) or not cron.strip():
        raise ConfigError(f"{label}: cron must be a cron expression such as '*/5 * * * *'")
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise ConfigError(f"{label}: args must be a list or tuple, got {args!r}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ConfigError(f"{label}: kwargs must be a dict, got {kwargs!r}")
    grace = (
        None if misfire_grace is None else check_seconds(f"{label}: misfire_grace", misfire_grace)
    )
    if timezone is not None:
        _zone(timezone)
    if name is not None and (not isinstance(name, str) or not name):
        raise ConfigError(f"{label}: name must be a non-empty str, got {name!r}")
    calls = _calls(definition, label, tenants, fallback_tenant, tuple(args), dict(kwargs or {}))
    base = name or definition.name
    schedules = []
    for tenant, call_kwargs in calls:
        encode_payload(tuple(args), call_kwargs, max_bytes=max_payload_bytes)  # JSON, or why not
        schedules.append(
            Schedule(
                name=base if len(calls) == 1 else f"{base}[{tenant}]",
                job=definition.name,
                cron=cron.strip(),
                tenant=tenant,
                queue=definition.queue,
                args=tuple(args),
                kwargs=call_kwargs,
                misfire_grace=grace,
                timezone=timezone,
            )
        )
    _check_cron(schedules[0], label)
    for schedule in schedules:
        if schedule.name in declared:
            raise ConfigError(
                f"a periodic schedule named {schedule.name!r} is already declared; give "
                "this one another name=…"
            )
    return schedules


def _calls(
    definition: JobDefinition[Any, Any],
    label: str,
    tenants: Sequence[object] | None,
    fallback: str | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> list[tuple[str, dict[str, Any]]]:
    """Each schedule's tenant and keyword arguments, checked against the job: with
    ``tenants``, a job whose tenant rule names an argument the call leaves out gets the tenant
    there; else the tenant is the one the arguments give, else the fallback tenant."""
    if tenants is None:
        bound = definition.check_arguments(args, kwargs)
        found = definition.tenant_of(args, kwargs, bound)
        if found is None or found == "":
            if fallback is None:
                raise ConfigError(
                    f"{label} has no tenant: pass tenant=… (or tenants=[…], one schedule each), "
                    "or arguments its tenant rule reads, or set App(fallback_tenant=…)"
                )
            found = fallback
        return [(check_tenant(found), kwargs)]
    if isinstance(tenants, (str, bytes)) or not isinstance(tenants, Sequence) or not tenants:
        raise ConfigError(f"{label}: tenants must be a non-empty list, got {tenants!r}")
    chosen = [check_tenant(t) for t in tenants]
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"{label}: tenants repeat a tenant: {chosen!r}")
    rule = definition.tenant_rule
    calls = []
    for tenant in chosen:
        given = dict(kwargs)
        if isinstance(rule, str) and rule not in given and not _positional(definition, args, rule):
            given[rule] = tenant  # the job reads its tenant there: the schedule's
        definition.check_arguments(args, given)  # names what does not fit
        calls.append((tenant, given))
    return calls


def _positional(definition: JobDefinition[Any, Any], args: tuple[Any, ...], name: str) -> bool:
    """Whether ``args`` reach the job's parameter ``name`` (it is among the first len(args)
    that may be given by position)."""
    for at, param in enumerate(definition.signature.parameters.values()):
        if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            return False
        if param.name == name:
            return at < len(args)
    return False


def _check_cron(schedule: Schedule, label: str) -> None:
    croniter = _croniter()
    from croniter import CroniterError

    if len(schedule.cron.split()) not in (5, 6):
        raise ConfigError(
            f"{label}: cron {schedule.cron!r} has {len(schedule.cron.split())} fields; give "
            "five (minute hour day-of-month month day-of-week, e.g. '*/5 * * * *') or six, "
            "the sixth being seconds (e.g. '* * * * * */10')"
        )
    try:
        croniter(schedule.cron)
        now = datetime.now().timestamp()
        upcoming = schedule.following(now)
    except (CroniterError, ValueError, KeyError) as exc:
        raise ConfigError(
            f"{label}: cron {schedule.cron!r} is not a valid cron expression ({exc}); e.g. "
            "'*/5 * * * *' (every 5 minutes) or '0 9 * * 1-5' (09:00 on weekdays)"
        ) from None
    if not math.isfinite(upcoming):
        raise ConfigError(f"{label}: cron {schedule.cron!r} never fires")


def _croniter() -> Any:
    try:
        from croniter import croniter
    except ImportError:
        raise ConfigError("periodic jobs need croniter: pip install 'fairq[cron]'") from None
    return croniter


def _zone(name: str | None) -> tzinfo | None:
    if name is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigError(
            f"timezone {name!r} is not a known time zone; give an IANA name such as "
            "'Europe/Berlin' (or none: UTC)"
        ) from None
