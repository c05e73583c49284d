"""Reads for inspection and settings: stats, jobs, dead jobs, queue defaults, job types.

None of these is on the enqueue/dequeue/ack path; stats may scan a queue's tenants.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import JobRow, Row, rate_of, tenant_key
from fairq.backends.postgres.steps import PgSteps, Sql, first, run
from fairq.contract import (
    JobCost,
    JobType,
    ListDeadParams,
    QueueSettings,
    StatsParams,
    TenantStats,
)
from fairq.contract.jobtypes import JobSignature
from fairq.job import JobInfo, JobState, decode_headers
from fairq.policy import history
from fairq.policy.throttle import Throttle


def queue_names(cur: Cursor[Row], q: Queries) -> list[str]:
    names = [row["name"] for row in cur.execute(q["queue_names"]).fetchall()]
    waiting = [row["queue"] for row in cur.execute(q["inbox_queues"]).fetchall()]
    return names + sorted(set(waiting) - set(names))


def next_due(cur: Cursor[Row], q: Queries, names: Sequence[str]) -> float | None:
    due: list[float] = []
    for name in names:
        row = cur.execute(q["next_due"], {"queue": name}).fetchone()
        if row is not None:
            times = (row["run_at"], row["deadline"], row["limited_until"])
            due += [value for value in times if value is not None]
    return min(due, default=None)


def queue_settings(cur: Cursor[Row], q: Queries, queue: str) -> QueueSettings:
    return run(cur, queue_settings_steps(q, queue))


def queue_settings_steps(q: Queries, queue: str) -> PgSteps[QueueSettings]:
    return settings_of(queue, first((yield Sql(q["queue_get"], {"name": queue}))))


def settings_of(queue: str, row: Row | None) -> QueueSettings:
    """A queue's settings from its row (query ``queue_get``): the defaults when it has none."""
    if row is None:
        return QueueSettings(queue=queue)
    return QueueSettings(
        queue=queue,
        weight=row["weight"],
        max_running=row["max_running"],
        rate=rate_of(row["rate_count"], row["rate_period"], row["rate_burst"]),
        half_life=row["half_life"],
        max_debt=row["max_debt"],
        max_in_flight=row["max_in_flight"],
    )


def stats(cur: Cursor[Row], q: Queries, params: StatsParams) -> list[TenantStats]:
    return run(cur, stats_steps(q, params))


def stats_steps(q: Queries, params: StatsParams) -> PgSteps[list[TenantStats]]:
    args = {
        "queue": params.queue,
        "tenant": params.tenant,
        "tenant_key": None if params.tenant is None else tenant_key(params.tenant),
    }
    return [_stats(row, params.now) for row in (yield Sql(q["tenants_stats"], args))]


def _stats(row: Row, now: float | None) -> TenantStats:
    usage = row["usage"]
    if now is not None:
        half_life = history.usage_half_life(row["half_life"])
        usage = history.decayed(usage, row["usage_at"], now, half_life)
    return TenantStats(
        queue=row["queue"],
        tenant=row["tenant"],
        weight=row["weight"],
        max_running=row["max_running"],
        ready=row["ready"],
        scheduled=row["scheduled"],
        running=row["running"],
        succeeded=row["succeeded"],
        failed=row["failed"],
        dead=row["dead"],
        cancelled=row["cancelled"],
        oldest_ready_at=row["oldest_ready_at"],
        rate=rate_of(row["rate_count"], row["rate_period"], row["rate_burst"]),
        limited_until=row["limited_until"],
        usage=usage,
    )


def job_rows(cur: Cursor[Row], q: Queries, ids: Sequence[str]) -> list[JobRow]:
    rows = cur.execute(q["jobs_by_ids"], {"ids": list(ids)}).fetchall()
    return [JobRow.from_row(row) for row in rows]


def get_jobs(cur: Cursor[Row], q: Queries, ids: Sequence[str]) -> list[JobInfo]:
    return run(cur, get_jobs_steps(q, ids))


def get_jobs_steps(q: Queries, ids: Sequence[str]) -> PgSteps[list[JobInfo]]:
    """Stored jobs, and jobs still in the inbox (committed by a caller's transaction, not yet
    taken in by a worker), in the order asked."""
    rows = yield Sql(q["jobs_by_ids"], {"ids": list(ids)})
    found = {job.id: job.info() for job in map(JobRow.from_row, rows)}
    for row in (yield Sql(q["inbox_by_ids"], {"ids": list(ids)})):
        found.setdefault(row["id"], _inbox_info(row))
    return [found[i] for i in ids if i in found]


def _inbox_info(row: Row) -> JobInfo:
    state = JobState.READY if row["run_at"] <= row["enqueued_at"] else JobState.SCHEDULED
    return JobInfo(
        id=row["id"],
        name=row["name"],
        queue=row["queue"],
        tenant=row["tenant"],
        state=state,
        payload=row["payload"],
        priority=row["priority"],
        attempts=0,
        max_attempts=row["max_attempts"],
        enqueued_at=row["enqueued_at"],
        run_at=row["run_at"],
        started_at=None,
        finished_at=None,
        deadline=None,
        last_error=None,
        ready_at=row["enqueued_at"] if state is JobState.READY else None,
        headers=decode_headers(row["headers"]),
    )


def list_dead(cur: Cursor[Row], q: Queries, params: ListDeadParams) -> list[JobInfo]:
    args = {
        "queue": params.queue,
        "tenant": params.tenant,
        "tenant_key": None if params.tenant is None else tenant_key(params.tenant),
        "limit": params.limit,
    }
    return [JobRow.from_row(row).info() for row in cur.execute(q["jobs_dead"], args).fetchall()]


def publish_job_types(cur: Cursor[Row], q: Queries, types: Sequence[JobType]) -> None:
    for job_type in types:
        cur.execute(
            q["job_types_upsert"],
            {
                "name": job_type.name,
                "queue": job_type.queue,
                "tenant_arg": job_type.tenant_arg,
                "params": list(job_type.params),
                "max_attempts": job_type.max_attempts,
                "lease_timeout": job_type.lease_timeout,
                "cost": job_type.cost,
                "throttle": json.dumps(
                    [
                        {"threshold": rule.threshold, "per": rule.per, "queue": rule.queue}
                        for rule in job_type.throttle
                    ]
                ),
                "signature": job_type.signature and job_type.signature.to_json(),
                "learn_cost": job_type.learn_cost,
            },
        )


def job_types(cur: Cursor[Row], q: Queries) -> dict[str, JobType]:
    return run(cur, job_types_steps(q))


def job_types_steps(q: Queries) -> PgSteps[dict[str, JobType]]:
    rows = yield Sql(q["job_types_all"])
    return {
        row["name"]: JobType(
            name=row["name"],
            queue=row["queue"],
            tenant_arg=row["tenant_arg"],
            params=tuple(row["params"]),
            max_attempts=row["max_attempts"],
            lease_timeout=row["lease_timeout"],
            cost=row["cost"],
            throttle=tuple(
                Throttle(rule["threshold"], rule["per"], rule["queue"])
                for rule in json.loads(row["throttle"])
            ),
            signature=JobSignature.from_json(row["signature"]),
            learn_cost=row["learn_cost"],
        )
        for row in rows
    }


def job_costs(cur: Cursor[Row], q: Queries, queue: str | None) -> list[JobCost]:
    """The learned costs (functions/costs.sql), by queue then name."""
    rows = cur.execute(q["job_costs"], {"queue": queue}).fetchall()
    return [
        JobCost(queue=row["queue"], name=row["name"], runs=row["runs"], estimate=row["mean"])
        for row in rows
    ]
