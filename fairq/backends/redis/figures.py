"""Reading the Redis store's figures (fairq/figures.py): one hash per (queue, time slot),
``Layout.figures_key``, written by the Lua functions (``figure`` and ``flush`` in
_lib_figures.lua, _lib_flush.lua) and expiring on their own; a field is ``tid:<kind><bucket>``."""

from __future__ import annotations

from typing import Any

from fairq.figures import FiguresParams, Key, TenantFigures, figures_from
from fairq.policy import histogram

from .inspect import queue_names
from .keys import Layout
from .records import text


def read(client: Any, layout: Layout, params: FiguresParams) -> list[TenantFigures]:
    """The window's slots of every queue asked, each queue's in one MULTI/EXEC (one moment),
    their tids named through the queue's tnames."""
    # one queue asked: its keys straight away (an unknown one has none)
    names = queue_names(client, layout) if params.queue is None else [params.queue]
    slots = range(histogram.first_slot(params.now), histogram.slot_of(params.now) + 1)
    counts: list[tuple[Key, int]] = []
    for queue in names:
        pipe: Any = client.pipeline(transaction=True)
        for slot in slots:
            pipe.hgetall(layout.figures_key(queue, slot))
        pipe.hgetall(layout.queue_key(queue, "tnames"))
        *found, tnames = pipe.execute()
        tenants = {text(tid): text(name) for tid, name in tnames.items()}
        for slot, fields in zip(slots, found, strict=True):
            for field, count in fields.items():
                tid, _, rest = text(field).partition(":")
                tenant = tenants.get(tid)
                if tenant is not None:  # a forgotten tenant's figures are left out
                    counts.append(((queue, tenant, slot, rest[0], int(rest[1:])), int(count)))
    return figures_from(counts, params)
