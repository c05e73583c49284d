"""Names derived from (schema, queue): advisory lock keys, NOTIFY channels; and lease tokens.

Both are computed by SQL too (queries/*.sql, the server-side functions in functions/), so they
are defined by expressions PostgreSQL evaluates: a queue's lock key is
``hashtextextended(queue, seed)`` with a per-schema ``seed``, and its channel is ``fairq_`` +
24 hex digits of ``md5(salt || queue)``. Different schemas never share a lock or a channel.
"""

from __future__ import annotations

import hashlib
import re

_LEASE_NUMBER = re.compile(r"^[1-9][0-9]{0,8}$")

#: The name of the channel ``close()`` uses to end a wait; no queue can be called this.
WAKE = "*wake*"


def schema_seed(schema: str) -> int:
    """The seed of the schema's queue lock keys: 64 bits of a digest of its name."""
    return int.from_bytes(hashlib.sha256(schema.encode()).digest()[:8], "big", signed=True)


def channel_salt(schema: str) -> str:
    return f"{schema}:"


def queue_channel(schema: str, queue: str) -> str:
    """The NOTIFY channel of one queue: short (channel names are limited to 63 bytes)."""
    digest = hashlib.md5((channel_salt(schema) + queue).encode(), usedforsecurity=False)
    return "fairq_" + digest.hexdigest()[:24]


def parse_token(token: str) -> tuple[str, int] | None:
    """(job id, lease number) a lease token names, or None when it cannot name any lease.

    The reference model compares ``str(leases)`` with the text after the last ``:``, so only
    a canonical decimal number can ever match.
    """
    job_id, sep, number = token.rpartition(":")
    if not sep or not _LEASE_NUMBER.match(number):
        return None
    return job_id, int(number)
