"""The fairq part of a relayed message: which lease the peer's worker runs the job under.

The relay publishes each job to the broker with its *ticket*: the lease's fields but the
payload (the broker message carries the arguments in the peer's own format). A plain JSON
object, so it travels in a Celery header, an RQ job's ``meta`` or a Dramatiq message option.

Its ``started_at`` and ``deadline`` are the relay's: when it took the job and its first hold
(renewed since, while the message waits). They say nothing of the run, which starts at the
worker's claim (``RelayedRuns.begin`` takes the run's times from the claim); ``token`` is what
the claim needs, ``lease_timeout`` is the job's own lease, ``cost`` the estimate charged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fairq.errors import FairqError, JobHeadersError
from fairq.job import Lease, check_headers

#: The key integrations store the ticket under, in whatever the peer's message has for it.
TICKET_KEY = "fairq"

_FIELDS: dict[str, tuple[type, ...]] = {
    "token": (str,),
    "job_id": (str,),
    "name": (str,),
    "queue": (str,),
    "tenant": (str,),
    "attempt": (int,),
    "max_attempts": (int,),
    "started_at": (int, float),
    "deadline": (int, float),
    "lease_timeout": (int, float),
    "cost": (int, float),
}


class BadTicket(FairqError, ValueError):
    """A message's fairq ticket is not one the relay wrote (edited, truncated, foreign)."""


def ticket_of(lease: Lease) -> dict[str, Any]:
    """The JSON object published with the job."""
    ticket = {name: getattr(lease, name) for name in _FIELDS}
    ticket["ready_at"] = lease.ready_at
    if lease.headers:
        ticket["headers"] = dict(lease.headers)
    return ticket


def lease_of(ticket: object) -> Lease:
    """The lease a ticket names (its payload is left empty: the peer's message holds it).

    Raises BadTicket naming the field that is missing or of the wrong type.
    """
    if not isinstance(ticket, Mapping):
        raise BadTicket(f"a fairq ticket must be a JSON object, got {type(ticket).__name__}")
    values: dict[str, Any] = {}
    for name, types in _FIELDS.items():
        value = ticket.get(name)
        if isinstance(value, bool) or not isinstance(value, types):
            expected = " or ".join(t.__name__ for t in types)
            raise BadTicket(
                f"fairq ticket field {name!r} must be {expected}, got {value!r}; the message "
                "was not published by `fairq relay` or was changed on the way"
            )
        values[name] = value
    return Lease(payload="", ready_at=_ready_at(ticket, values), headers=_headers(ticket), **values)


def _ready_at(ticket: Mapping[str, Any], values: Mapping[str, Any]) -> float:
    """The ticket's ready_at; a ticket from a relay older than it: its start (no wait known)."""
    value = ticket.get("ready_at")
    if value is None:
        return float(values["started_at"])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadTicket(f"fairq ticket field 'ready_at' must be a number, got {value!r}")
    return float(value)


def _headers(ticket: Mapping[str, Any]) -> dict[str, str]:
    """The job's headers (a ticket without them, from an older relay: none)."""
    value = ticket.get("headers", {})
    try:
        return check_headers(value)
    except JobHeadersError as exc:
        raise BadTicket(f"fairq ticket field 'headers' is invalid: {exc}") from None
