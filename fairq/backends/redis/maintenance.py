"""Maintenance on Redis: maintain.lua per group of queues (one call on a single Redis, one
per slot on a Cluster), each call promoting, expiring and un-limiting its queues and pruning
old jobs (_lib_maintenance.lua); on a Cluster the ids pruned then leave the directory."""

from __future__ import annotations

from fairq.contract import MaintainParams, MaintainResult

from . import calls, inspect
from .directory import Directory
from .plumbing import Call, Store, grouped, runs
from .records import num, text
from .scripts import Arg


def maintain(store: Store, directory: Directory, params: MaintainParams) -> MaintainResult:
    """maintain.lua per run of queues of one group (one call on a single Redis), the
    queues only pruned joining the call of their group; on a Cluster the ids pruned then
    leave the directory."""
    with store.translated():
        known = inspect.queue_names(store.client, store.layout)
    asked = known if params.queues is None else list(dict.fromkeys(params.queues))
    pruned_only = [q for q in known if q not in asked] if params.retention is not None else []
    others = grouped(store.layout, pruned_only)
    parts = [(r, others.pop(store.layout.group(r[0]), [])) for r in runs(store.layout, asked)]
    parts += [([], queues) for queues in others.values()]
    retention = "" if params.retention is None else num(params.retention)
    made: list[tuple[Call, dict[str, int]]] = []
    for maintained, pruned in parts:
        blocks = calls.blocks([*maintained, *pruned])
        shared = [] if store.layout.cluster else [store.layout.directory]
        keys = [*shared, *store.keys(blocks, params.now)]
        args: list[Arg] = [store.at(params.now), retention, len(maintained), len(shared)]
        made.append((("maintain", None, keys, args), blocks))
    replies = store.run_all([call for call, _ in made]) if made else []
    result = MaintainResult()
    gone: list[str] = []
    for (_, blocks), reply in zip(made, replies, strict=True):
        due = text(reply[2])
        names = {block: name for name, block in blocks.items()}
        next_due = float(due) if due else None
        if result.next_due is not None and (next_due is None or result.next_due < next_due):
            next_due = result.next_due
        result = MaintainResult(
            promoted=result.promoted + int(reply[0]),
            expired=[*result.expired, *calls.expired(names, reply[3])],
            pruned=result.pruned + int(reply[1]),
            next_due=next_due,
        )
        gone += [text(i) for i in reply[4]]
    if gone:
        with store.translated():
            directory.release(gone)
    return result
