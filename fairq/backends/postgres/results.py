"""Rows and statuses of the store turned into the contract's results and errors: leases,
ack answers, refused duplicates."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import Row
from fairq.backends.postgres.steps import PgSteps, Sql
from fairq.contract import AckManyResult
from fairq.errors import DuplicateJob
from fairq.job import Lease, decode_headers, lease_token

Parsed = tuple[str, int] | None  # a lease token as keys.parse_token reads it


def lease(row: Row) -> Lease:
    return Lease(
        token=lease_token(row["l_id"], row["l_leases"]),
        job_id=row["l_id"],
        name=row["l_name"],
        queue=row["l_queue"],
        tenant=row["l_tenant"],
        payload=row["l_payload"],
        attempt=row["l_attempts"],
        max_attempts=row["l_max_attempts"],
        started_at=row["l_started_at"],
        deadline=row["l_deadline"],
        lease_timeout=row["l_lease_timeout"],
        cost=row["l_cost"],
        ready_at=row["l_ready_at"],
        headers=decode_headers(row["l_headers"]),
    )


def ack_result(
    tokens: Sequence[str], parsed: Sequence[Parsed], statuses: Sequence[str]
) -> AckManyResult:
    """ack_many's statuses (one per token sent) back onto the tokens given."""
    answers = iter(statuses)
    acked: list[str] = []
    lost: list[str] = []
    for token, found in zip(tokens, parsed, strict=True):
        status = next(answers) if found is not None else "not_found"
        (acked if status == "ok" else lost).append(token)
    return AckManyResult(acked=acked, lost=lost)


def refuse_succeeded(q: Queries, ids: list[str]) -> PgSteps[None]:
    """Succeeded jobs live in their own table, out of reach of jobs' unique index: an id one
    of them holds is refused here, after the insert (see queries.sql: succeeded_ids)."""
    taken = [row["id"] for row in (yield Sql(q["succeeded_ids"], {"ids": ids}))]
    if taken:
        raise DuplicateJob(
            f"a job id is already stored (succeeded: {taken}); nothing of the batch was stored"
        )


def duplicate(exc: psycopg.errors.UniqueViolation) -> DuplicateJob:
    detail = exc.diag.message_detail or str(exc)
    return DuplicateJob(f"a job id is already stored ({detail}); nothing of the batch was stored")
