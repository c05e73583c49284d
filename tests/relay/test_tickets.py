"""A relayed message's ticket carries what the peer's worker needs of the lease: its wait
(``ready_at``) and the job's headers, through JSON; a ticket from an older relay still reads."""

from __future__ import annotations

import json

import pytest

from fairq.job import Lease
from fairq.relay.tickets import BadTicket, lease_of, ticket_of

LEASE = Lease(
    token="j:1", job_id="j", name="t", queue="bulk", tenant="acme", payload="{}", attempt=1,
    max_attempts=3, started_at=5.0, deadline=65.0, lease_timeout=60.0, cost=1.0, ready_at=2.0,
    headers={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
)  # fmt: skip


def test_ready_at_and_headers_survive_the_broker() -> None:
    back = lease_of(json.loads(json.dumps(ticket_of(LEASE))))
    assert (back.ready_at, back.headers) == (2.0, LEASE.headers)


def test_a_ticket_from_an_older_relay_reads_as_no_wait_and_no_headers() -> None:
    old = {k: v for k, v in ticket_of(LEASE).items() if k not in ("ready_at", "headers")}
    back = lease_of(old)
    assert (back.ready_at, back.headers) == (5.0, {})


def test_bad_headers_in_a_ticket_are_refused_naming_the_field() -> None:
    with pytest.raises(BadTicket, match=r"field 'headers' is invalid: header 'n': 1"):
        lease_of({**ticket_of(LEASE), "headers": {"n": 1}})
