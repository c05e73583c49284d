"""Inspection: stats, jobs, dead letters and job types, read without scripts.

Reads change nothing, so they run as plain commands, written as operations that a blocking or
an asyncio client performs (fairq.backends.steps); each queue's reads go in one MULTI/EXEC
so they see one consistent moment. Stats come from the per-tenant counters; only a tenant's
oldest ready time needs one ordered-index lookup (O(log n)), never a scan of its jobs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fairq.contract import (
    JobCost,
    JobCostsParams,
    JobType,
    ListDeadParams,
    QueueSettings,
    StatsParams,
    TenantStats,
)
from fairq.contract.jobtypes import JobSignature
from fairq.job import JobInfo, Progress
from fairq.policy.throttle import Throttle

from .keys import TID_WIDTH, Layout
from .records import (
    META_FIELDS,
    JobRecord,
    QueueDefaults,
    TenantRecord,
    job_cost,
    job_info,
    member_job_id,
    oldest_ready_at,
    text,
)
from .steps import Batch, RedisSteps, read

DEAD_PAGE = 500

#: redis-py's reply types are unions of every RESP type; replies are checked where parsed.
Client = Any


def queue_names(client: Client, layout: Layout) -> list[str]:
    return sorted(text(name) for name in client.smembers(layout.queues))


def _names(found: Any) -> list[str]:
    return sorted(text(name) for name in found)


def stats(layout: Layout, params: StatsParams) -> RedisSteps[list[TenantStats]]:
    (found,) = yield Batch(lambda pipe: pipe.smembers(layout.queues))
    names = _names(found)
    if params.queue is not None:
        names = [n for n in names if n == params.queue]
    rows: list[TenantStats] = []
    for queue in names:
        rows += yield from _queue_stats(layout, queue, params.tenant, params.now)
    return sorted(rows, key=lambda r: (r.queue, r.tenant))


def _queue_stats(
    layout: Layout, queue: str, only: str | None, now: float | None
) -> RedisSteps[list[TenantStats]]:
    key = functools.partial(layout.queue_key, queue)

    def fill(pipe: Any) -> None:
        pipe.hmget(key("meta"), list(META_FIELDS))
        if only is None:
            pipe.hgetall(key("tnames"))
            pipe.hgetall(key("tenants"))
        else:
            pipe.hget(key("tids"), only)

    if only is None:
        meta, names, records = yield Batch(fill, transaction=True)
        tenants = {int(tid): text(name) for tid, name in names.items()}
        parsed = {int(tid): TenantRecord.parse(raw) for tid, raw in records.items()}
    else:
        meta, tid = yield Batch(fill, transaction=True)
        if tid is None:
            return []
        tenants = {int(tid): only}
        (raw,) = yield Batch(lambda pipe: pipe.hget(key("tenants"), tid))
        parsed = {int(tid): TenantRecord.parse(raw)}
    defaults = QueueDefaults.parse(meta)
    oldest = yield from _oldest(key("readyat"), [t for t, r in parsed.items() if r.ready])
    return [
        parsed[tid].stats(queue, tenants[tid], defaults, oldest.get(tid), now) for tid in parsed
    ]


def job_costs(layout: Layout, params: JobCostsParams) -> RedisSteps[list[JobCost]]:
    """Each queue's learned costs (its ``costs`` hash), sorted by queue then job name."""
    (found,) = yield Batch(lambda pipe: pipe.smembers(layout.queues))
    names = [n for n in _names(found) if params.queue is None or n == params.queue]
    if not names:
        return []

    def fill(pipe: Any) -> None:
        for queue in names:
            pipe.hgetall(layout.queue_key(queue, "costs"))

    hashes = yield Batch(fill)
    rows = [
        job_cost(queue, text(name), raw)
        for queue, found in zip(names, hashes, strict=True)
        for name, raw in found.items()
    ]
    return sorted(rows, key=lambda c: (c.queue, c.name))


def _oldest(readyat: str, tids: list[int]) -> RedisSteps[dict[int, float | None]]:
    if not tids:
        return {}

    def fill(pipe: Any) -> None:
        for tid in tids:
            low = b"[" + str(tid).zfill(TID_WIDTH).encode()
            high = b"(" + str(tid + 1).zfill(TID_WIDTH).encode()
            pipe.zrangebylex(readyat, low, high, start=0, num=1)

    found = yield Batch(fill)
    pairs = zip(tids, found, strict=True)
    return {tid: oldest_ready_at(members[0] if members else None) for tid, members in pairs}


def get_queue(client: Client, layout: Layout, queue: str) -> QueueSettings:
    meta = client.hmget(layout.queue_key(queue, "meta"), list(META_FIELDS))
    defaults = QueueDefaults.parse(meta)
    return QueueSettings(
        queue=queue,
        weight=defaults.weight,
        max_running=defaults.cap,
        rate=defaults.rate,
        half_life=defaults.half_life,
        max_debt=defaults.max_debt,
        max_in_flight=defaults.max_in_flight,
    )


def get_jobs(
    layout: Layout, located: dict[str, str], ids: Sequence[str]
) -> RedisSteps[list[JobInfo]]:
    """The jobs among ``ids`` that exist, in order; ``located``: their queues
    (``Directory.locate``)."""
    by_queue: dict[str, list[str]] = {}
    for job_id in dict.fromkeys(ids):
        if job_id in located:
            by_queue.setdefault(located[job_id], []).append(job_id)
    found: dict[str, JobInfo] = {}
    for queue, queue_ids in by_queue.items():
        found.update((yield from jobs_in_queue(layout, queue, queue_ids)))
    return [found[i] for i in ids if i in found]


def jobs_in_queue(layout: Layout, queue: str, ids: Sequence[str]) -> RedisSteps[dict[str, JobInfo]]:
    key = functools.partial(layout.queue_key, queue)

    def fill(pipe: Any) -> None:
        for part in ("jobs", "bodies", "errors", "progress", "results"):
            pipe.hmget(key(part), list(ids))

    records, bodies, errors, progress, results = yield Batch(fill, transaction=True)
    rows = zip(ids, records, bodies, errors, progress, results, strict=True)
    present = [(i, JobRecord.parse(r), b, e, p, v) for i, r, b, e, p, v in rows if r is not None]
    tids = sorted({entry[1].tid for entry in present})
    found = []
    if tids:
        (found,) = yield Batch(lambda pipe: pipe.hmget(key("tnames"), [str(t) for t in tids]))
    names = dict(zip(tids, found, strict=True))
    return {
        i: with_progress(
            job_info(i, queue, rec, body, text(names[rec.tid]), None if e is None else text(e), v),
            p,
        )
        for i, rec, body, e, p, v in present
    }


def with_progress(info: JobInfo, raw: bytes | None) -> JobInfo:
    return info if raw is None else replace(info, progress=Progress.decode(text(raw)))


def list_dead(client: Client, layout: Layout, params: ListDeadParams) -> list[JobInfo]:
    """Oldest death first across queues: each queue gives its first ``limit`` matches."""
    names = queue_names(client, layout)
    if params.queue is not None:
        names = [n for n in names if n == params.queue]
    found: list[tuple[float, int, JobInfo]] = []
    for queue in names:
        found += _dead_in_queue(client, layout, queue, params)
    found.sort(key=lambda entry: (entry[0], entry[1]))
    return [info for _, _, info in found[: params.limit]]


def _dead_in_queue(
    client: Client, layout: Layout, queue: str, params: ListDeadParams
) -> list[tuple[float, int, JobInfo]]:
    dead_key = layout.queue_key(queue, "dead")
    out: list[tuple[float, int, JobInfo]] = []
    start = 0
    while len(out) < params.limit:
        page = client.zrange(dead_key, start, start + DEAD_PAGE - 1, withscores=True)
        if not page:
            break
        start += DEAD_PAGE
        ids = [member_job_id(m) for m, _ in page]
        infos = read(client, jobs_in_queue(layout, queue, ids))
        for (member, score), job_id in zip(page, ids, strict=True):
            info = infos.get(job_id)
            if info is not None and (params.tenant is None or info.tenant == params.tenant):
                out.append((float(score), int(member[:16]), info))
    return out[: params.limit]


def job_types(layout: Layout) -> RedisSteps[dict[str, JobType]]:
    (raw,) = yield Batch(lambda pipe: pipe.hgetall(layout.types))
    types: dict[str, JobType] = {}
    for name, value in raw.items():
        data = json.loads(value)
        data["params"] = tuple(data["params"])
        data["throttle"] = tuple(Throttle(**rule) for rule in data.get("throttle", []))
        data["signature"] = JobSignature.from_json(data.get("signature"))
        types[text(name)] = JobType(**data)
    return types


def job_type_json(job_type: JobType) -> str:
    return json.dumps(
        {
            "name": job_type.name,
            "queue": job_type.queue,
            "tenant_arg": job_type.tenant_arg,
            "params": list(job_type.params),
            "max_attempts": job_type.max_attempts,
            "lease_timeout": job_type.lease_timeout,
            "cost": job_type.cost,
            "learn_cost": job_type.learn_cost,
            "throttle": [
                {"threshold": r.threshold, "per": r.per, "queue": r.queue}
                for r in job_type.throttle
            ],
            "signature": job_type.signature and job_type.signature.to_json(),
        },
        ensure_ascii=False,
    )
