"""Tenant slots: a leased claim on one of a tenant's running places in a queue.

The guard around a job of a peer broker (Celery, RQ, Dramatiq) runs it only while it holds a
slot: ``acquire_slot`` drops the (queue, tenant)'s expired slots, then takes one for ``lease``
seconds if fewer than the cap are held. The cap is an explicit ``limit``, else the tenant's
``max_running`` in the queue (its own setting, else the queue's default), else none. A slot is
held while ``now < deadline``: renewing sets ``deadline = now + lease``, releasing ends it, and
a holder that dies without releasing loses it at its deadline. Slots and native runs share the
cap's *setting*, not its count: a slot does not hold back a native dequeue, nor the reverse.

A job refused a slot may be parked in the (queue, tenant)'s line of waiters (``park``): the
peer keeps a timed copy in its broker as well (the back-off), so a parked job comes back on its
own even when nobody wakes it; a release wakes the oldest waiter not already woken, handing its
``park`` text to the releasing process to publish at once. Copies carry the waiter's id: the
first to take a slot leaves the line, and any copy after it finds its place gone and is dropped,
so a job runs once. A line untouched for ``PARK_TTL`` seconds is dropped by the store.

A token names its slot and where it lives, ``"{queue}:{nonce}:{tenant}"`` (queue names have
no ``:``, the tenant is the rest), so every store finds a slot from its token alone.
"""

from __future__ import annotations

import re
import secrets
from typing import NamedTuple

from fairq.policy.queues import check_queue_name

_NONCE = re.compile(r"^[0-9a-f]{32}$")
_QUEUE = re.compile(r"^[A-Za-z0-9_.\-]+$")


#: A line of waiters untouched this long (seconds) is forgotten (each timed copy touches it).
PARK_TTL = 86400.0


class SlotKey(NamedTuple):
    """What a slot token names: the (queue, tenant) it counts in, and the slot itself."""

    queue: str
    nonce: str  # 32 hex digits, random: unique among every slot ever taken
    tenant: str


def new_slot(queue: str, tenant: str) -> SlotKey:
    """A new slot's key (the nonce is 128 random bits)."""
    return SlotKey(check_queue_name(queue), secrets.token_hex(16), tenant)


def token_of(key: SlotKey) -> str:
    return f"{key.queue}:{key.nonce}:{key.tenant}"


def parse_token(token: object) -> SlotKey | None:
    """The slot a token names, or None when it cannot name any (reported lost, not raised)."""
    if not isinstance(token, str):
        return None
    parts = token.split(":", 2)
    if len(parts) != 3 or not _QUEUE.match(parts[0]) or not _NONCE.match(parts[1]):
        return None
    if not parts[2]:
        return None
    return SlotKey(*parts)


def cap_of(limit: int | None, setting: int | None) -> int | None:
    """The cap an acquire is held to: its explicit limit, else the tenant's setting."""
    return limit if limit is not None else setting


def free(held: int, cap: int | None) -> bool:
    """May one more slot be taken, with ``held`` unexpired slots held?"""
    return cap is None or held < cap


def new_waiter() -> str:
    """A parked job's place in line: 32 random hex digits."""
    return secrets.token_hex(16)


def is_waiter(text: object) -> bool:
    return isinstance(text, str) and _NONCE.match(text) is not None
