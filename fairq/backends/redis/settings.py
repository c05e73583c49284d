"""Settings on Redis, as steps (fairq.backends.steps) that the blocking and the asyncio store
drive: a queue's defaults (set_queue.lua) and a tenant's own (set_tenant.lua), each stored
and its tenants resettled in one call in the queue's slot."""

from __future__ import annotations

from functools import partial
from typing import Any

from fairq.contract import KEEP, Keep, SetQueueParams, TenantSettingsParams, TenantStats

from . import calls
from .plumbing import Store
from .records import QueueDefaults, TenantRecord, num, oldest_ready_at, rate_arg, rate_from, text
from .scripts import Arg
from .steps import Blocking, FCall, RedisSteps


def _keys(store: Store, queue: str, now: float) -> RedisSteps[tuple[list[str], int]]:
    """A settings script's keys, and how many of them are shared by queues: the queues set
    first on a single Redis (the script adds the queue); on a Cluster the queue is
    registered here."""
    keys = yield from store.keys_steps({queue: 1}, now)
    if store.layout.cluster:
        yield Blocking(partial(store.register, [queue]))
        return keys, 0
    return [store.layout.queues, *keys], 1


def set_queue(store: Store, params: SetQueueParams) -> RedisSteps[None]:
    """The settings ``params`` keeps go as 'keep': the script leaves the stored ones, read in
    the same call."""
    settings, keep = params.settings, params.keep

    def arg(name: str, value: object, form: Any) -> str:
        return calls.setting(KEEP if name in keep else value, form)

    rate = rate_arg(settings.rate).split(",") if settings.rate else ["", "", ""]
    keys, shared = yield from _keys(store, settings.queue, params.now)
    args: list[Arg] = [
        settings.queue,
        arg("weight", settings.weight, num),
        arg("max_running", settings.max_running, str),
        *(["keep"] * 3 if "rate" in keep else rate),
        arg("half_life", settings.half_life, num),
        arg("max_debt", settings.max_debt, num),
        store.at(params.now),
        arg("max_in_flight", settings.max_in_flight, str),
        shared,
    ]
    yield FCall("set_queue", keys, args)


def set_tenant(store: Store, params: TenantSettingsParams) -> RedisSteps[TenantStats]:
    keys, shared = yield from _keys(store, params.queue, params.now)
    args: list[Arg] = [
        params.queue,
        params.tenant,
        calls.setting(params.weight, num),
        calls.setting(params.max_running, str),
        "keep" if isinstance(params.rate, Keep) else rate_arg(params.rate),
        store.at(params.now),
        shared,
    ]
    raw, oldest, *meta = yield FCall("set_tenant", keys, args)
    weight, cap, rate, half_life, max_debt, now = (text(v) for v in meta)
    defaults = QueueDefaults(
        weight=float(weight),
        cap=int(cap) if cap else None,
        rate=rate_from(*rate.split(",")) if rate else None,
        half_life=float(half_life) if half_life else None,
        max_debt=float(max_debt),
    )
    oldest_at = oldest_ready_at(oldest or None)
    return TenantRecord.parse(raw).stats(
        params.queue, params.tenant, defaults, oldest_at, float(now)
    )
