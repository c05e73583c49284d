"""Rows and statuses of the store turned into the contract's results and errors: leases,
ack answers."""

from __future__ import annotations

from collections.abc import Sequence

from fairq.backends.postgres.records import Row
from fairq.contract import AckManyResult
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


def missed(rows: Sequence[Row]) -> bool:
    """Whether a dispatch's rows end with its "missed" row: it handed out nothing although
    eligible tenants were there, every one held by another dispatch (functions/dispatch.sql)."""
    return any(row["l_id"] is None and not row.get("due") for row in rows)


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
