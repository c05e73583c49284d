"""What a Redis store checks before it writes into a key prefix: that no key holds another type
of value than fairq keeps there, and that a queue's records were written by this layout."""

from __future__ import annotations

from typing import Any

from fairq.errors import SchemaError

from .keys import LAYOUT, Layout
from .records import OLD_LAYOUT, text
from .steps import Batch, RedisSteps, read


def check_types(
    client: Any,
    safe_url: str,
    expected: dict[str, str],
    layout: Layout | None = None,
    queue: str | None = None,
) -> None:
    """``types_checked`` with a blocking client."""
    read(client, types_checked(safe_url, expected, layout, queue))


def types_checked(
    safe_url: str,
    expected: dict[str, str],
    layout: Layout | None = None,
    queue: str | None = None,
) -> RedisSteps[None]:
    """Refuse, before anything is written, keys that hold another type of value; and with
    ``queue`` (and its ``layout``), a queue whose records another layout wrote (it has tenants,
    but not our LAYOUT). One round trip."""

    def fill(pipe: Any) -> None:
        for key in expected:
            pipe.type(key)
        if queue is not None and layout is not None:
            pipe.hmget(layout.queue_key(queue, "meta"), "ntid", "layout")

    found = yield Batch(fill)
    for (key, want), raw in zip(expected.items(), found[: len(expected)], strict=True):
        have = text(raw)
        if have not in ("none", want):
            raise SchemaError(
                f"Redis at {safe_url} has a {have} at {key!r}, where fairq keeps a {want}; "
                "nothing was changed. Use another key prefix (?prefix=… in the URL) or another "
                "database"
            )
    if queue is not None and layout is not None:
        ntid, stored = found[-1]
        if ntid is not None and (stored is None or text(stored) != LAYOUT):
            raise SchemaError(
                f"Redis at {safe_url}, queue {queue!r}: "
                + OLD_LAYOUT.format(layout=LAYOUT)
                + "; nothing was changed"
            )
