"""A queue's recorded jobs on Redis (``Backend.history``, fairq/recorded.py).

Plain reads, no script: an ``HSCAN`` of the queue's ``jobs`` hash (its records come with the
scan), then ``HMGET`` of those jobs' bodies (their names) and of their tenants' names. Redis
runs each command alone and none of these writes or blocks, so workers' scripts run between
the pages as usual. The cursor is HSCAN's: no order, and a job may come twice (when the hash
is resized during the read), which the contract allows; a page holds about ``limit`` jobs
(COUNT is a hint to Redis: a small hash comes whole). On a Cluster all of a queue's keys are
in one slot, so the same commands go to the one master that holds it.
"""

from __future__ import annotations

from typing import Any

from fairq.recorded import HistoryPage, HistoryParams, RecordedJob

from .keys import Layout
from .records import JobRecord, decode_body, text
from .steps import Batch, RedisSteps


def read(layout: Layout, params: HistoryParams) -> RedisSteps[HistoryPage]:
    jobs_key = layout.queue_key(params.queue, "jobs")
    cursor = 0 if params.cursor is None else int(params.cursor)
    ((after, found),) = yield Batch(lambda pipe: pipe.hscan(jobs_key, cursor, count=params.limit))
    records = [
        (text(job_id), record)
        for job_id, raw in found.items()
        if params.since <= (record := JobRecord.parse(raw)).enqueued_at < params.until
    ]
    next_cursor = None if int(after) == 0 else str(int(after))
    if not records:
        return HistoryPage(jobs=[], cursor=next_cursor)
    tids = sorted({record.tid for _, record in records})

    def fill(pipe: Any) -> None:
        pipe.hmget(layout.queue_key(params.queue, "bodies"), [job_id for job_id, _ in records])
        pipe.hmget(layout.queue_key(params.queue, "tnames"), [str(tid) for tid in tids])

    bodies, names = yield Batch(fill)
    tenants = dict(zip(tids, names, strict=True))
    jobs = [
        RecordedJob(
            id=job_id,
            name=decode_body(body)[0],
            tenant=text(tenants[record.tid]),
            state=record.state,
            priority=record.priority,
            attempts=record.attempts,
            cost=record.cost,
            enqueued_at=record.enqueued_at,
            run_at=record.run_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
        )
        for (job_id, record), body in zip(records, bodies, strict=True)
        if body is not None and tenants[record.tid] is not None  # pruned since the scan
    ]
    return HistoryPage(jobs=jobs, cursor=next_cursor)
