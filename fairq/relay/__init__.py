"""Fair scheduling in front of a peer's broker (Celery, RQ, Dramatiq): the relay and the
peer-side runs of relayed jobs. Broker-agnostic; ``fairq.integrations`` adapts each peer.

* ``Relay`` (relay.py) takes jobs from the store in fair order and publishes them;
* ``Holds`` (holds.py) keeps what it published unclaimed until a worker's claim, and gives it
  back when the relay stops or a message never reaches a worker;
* ``RelayedRuns`` (runs.py) claims, keeps alive and ends them inside the peer's worker;
* tickets.py is what travels with each message;
* ``RelaySource`` is what ``fairq relay module:attribute`` expects to find.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from fairq.app import App
from fairq.relay.relay import Publisher, Relay, UnknownTask
from fairq.relay.runs import RelayedRun, RelayedRuns
from fairq.relay.tickets import TICKET_KEY, BadTicket, lease_of, ticket_of

__all__ = [
    "TICKET_KEY",
    "BadTicket",
    "Publisher",
    "Relay",
    "RelaySource",
    "RelayedRun",
    "RelayedRuns",
    "UnknownTask",
    "lease_of",
    "ticket_of",
]


@runtime_checkable
class RelaySource(Protocol):
    """An integration object a relay runs from: the fairq App holding the jobs, the queues of
    its fair tasks, and a publisher into its broker."""

    app: App

    def relay_queues(self) -> Sequence[str]: ...

    def publisher(self) -> Publisher: ...
