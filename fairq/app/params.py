"""The App's settings and inspection calls, checked and made into the store's params.

Written once for ``App.set_tenant`` … and their async twins (``App.aset_tenant`` …,
fairq/app/aio.py), so both refuse the same bad arguments with the same errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

from fairq.contract import (
    KEEP,
    CancelParams,
    FiguresParams,
    Keep,
    ListDeadParams,
    QueueSettings,
    RequeueParams,
    SetQueueParams,
    StatsParams,
    TenantSettingsParams,
)
from fairq.errors import ConfigError
from fairq.policy.bounds import (
    check_max_in_flight,
    check_max_running,
    check_seconds,
    check_tenant,
    check_weight,
)
from fairq.policy.queues import check_queue_name
from fairq.policy.rate import Rate, check_rate


def tenant_settings(
    now: float,
    queue: str,
    tenant: str,
    *,
    weight: float | Keep | None = KEEP,
    max_running: int | Keep | None = KEEP,
    rate: Rate | str | Keep | None = KEEP,
) -> TenantSettingsParams:
    if not isinstance(weight, Keep) and weight is not None:
        weight = check_weight(weight, paused_ok=True)
    if not isinstance(max_running, Keep):
        max_running = check_max_running(max_running)
    if not isinstance(rate, Keep):
        rate = check_rate(rate)
    return TenantSettingsParams(
        queue=check_queue_name(queue),
        tenant=check_tenant(tenant),
        now=now,
        weight=weight,
        max_running=max_running,
        rate=rate,
    )


def queue_settings(
    now: float,
    queue: str,
    *,
    weight: float | Keep = KEEP,
    max_running: int | Keep | None = KEEP,
    rate: Rate | str | Keep | None = KEEP,
    half_life: float | timedelta | Keep | None = KEEP,
    max_debt: float | timedelta | Keep = KEEP,
    max_in_flight: int | Keep | None = KEEP,
) -> SetQueueParams:
    """The settings given, checked; each left at KEEP stays as the store has it (the value
    in ``QueueSettings`` for it is only a placeholder, which the store does not read)."""
    asked = {"weight": weight, "max_running": max_running, "rate": rate, "half_life": half_life,
             "max_debt": max_debt, "max_in_flight": max_in_flight}  # fmt: skip
    default = QueueSettings(queue=check_queue_name(queue))
    settings = QueueSettings(
        queue=default.queue,
        weight=default.weight if isinstance(weight, Keep) else check_weight(weight),
        max_running=None if isinstance(max_running, Keep) else check_max_running(max_running),
        rate=None if isinstance(rate, Keep) else check_rate(rate),
        half_life=None if isinstance(half_life, Keep) or half_life is None
        else check_seconds("half_life", half_life),
        max_debt=default.max_debt if isinstance(max_debt, Keep)
        else check_seconds("max_debt", max_debt),
        max_in_flight=None if isinstance(max_in_flight, Keep)
        else check_max_in_flight(max_in_flight),
    )  # fmt: skip
    given = [name for name, value in asked.items() if not isinstance(value, Keep)]
    return SetQueueParams.changing(settings, now, given)


def stats(now: float, queue: str | None, tenant: str | None) -> StatsParams:
    return StatsParams(queue=queue, tenant=tenant_filter(tenant), now=now)


def figures(now: float, queue: str | None, tenant: str | None) -> FiguresParams:
    return FiguresParams(queue=queue, tenant=tenant_filter(tenant), now=now)


def dead(queue: str | None, tenant: str | None, limit: int) -> ListDeadParams:
    return ListDeadParams(queue=queue, tenant=tenant_filter(tenant), limit=limit)


def requeue(now: float, ids: Sequence[str]) -> RequeueParams:
    return RequeueParams(ids=list(ids), now=now)


def cancel(now: float, ids: Sequence[str]) -> CancelParams:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise ConfigError(f"ids must be a list of job ids, got {ids!r}; for one, use cancel")
    return CancelParams(ids=[job_id(i) for i in ids], now=now)


def job_id(found: object) -> str:
    if not isinstance(found, str) or not found:
        raise ConfigError(f"a job id is a non-empty str (as enqueue returned it), got {found!r}")
    return found


def tenant_filter(tenant: str | None) -> str | None:
    """A tenant to look for: no store can hold one that ``check_tenant`` refuses."""
    return None if tenant is None else check_tenant(tenant)
