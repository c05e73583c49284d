"""The Lua operations: one Redis Functions library, loaded once, called with FCALL.

The library is one Lua chunk made of the files in ``lua/``: helper parts (``_lib*.lua``, each
one step's local functions, created once when the library is loaded rather than on every call,
which is what EVALSHA of a self-contained script paid for) and one file per operation, each
registering its function. A file sees only the locals of the files before it, so ``NEEDS``
names, for every file, the files whose locals it calls, and ``parts`` puts each after what it
needs. The library's name carries a hash of its source
(``fairq_<hash>``, functions ``fairq_<hash>_<op>``), so two fairq versions sharing a Redis each
call their own code; ``FUNCTION LOAD REPLACE`` makes loading idempotent. When the server does
not know the function (restart without persistence, ``FUNCTION FLUSH``, failover) we load the
library and try once more, which is safe because a function that is not loaded did not run."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.client import Pipeline

from fairq.policy import cost, histogram

from .db import REPLY_TTL_MS
from .keys import FIGURES_TTL, LAYOUT, QUEUE_PARTS

Arg = str | bytes | int | float

#: Every file of the library (``lua/<name>.lua``) and the files whose locals it calls; a file
#: that needs one needs what that one needs too, so only direct uses are listed. Helpers
#: first, then the operations (``ack_dequeue`` calls the locals of the two it joins).
NEEDS: dict[str, tuple[str, ...]] = {
    "_lib": (),
    "_lib_tenants": ("_lib",),
    "_lib_figures": (),
    "_lib_jobs": ("_lib_tenants",),
    "_lib_costs": ("_lib_jobs",),
    "_lib_flush": ("_lib_tenants", "_lib_costs"),
    "_lib_leases": ("_lib_jobs", "_lib_figures", "_lib_costs", "_lib_flush"),
    "_lib_dispatch": ("_lib_jobs", "_lib_figures", "_lib_costs"),
    "_lib_maintenance": ("_lib_leases", "_lib_flush"),
    "_lib_slots": ("_lib_tenants",),
    "_lib_unique": ("_lib",),
    "enqueue": ("_lib_jobs", "_lib_unique", "_lib_flush"),
    "dequeue": ("_lib_maintenance", "_lib_dispatch", "_lib_leases"),
    "ack_many": ("_lib_leases",),
    "ack_dequeue": ("ack_many", "dequeue"),
    "fail": ("_lib_leases",),
    "release": ("_lib_leases", "_lib_figures"),
    "heartbeat": ("_lib_leases",),
    "checkpoint": ("_lib_leases",),
    "maintain": ("_lib_maintenance",),
    "set_queue": ("_lib_flush",),
    "set_tenant": ("_lib_jobs", "_lib_flush"),
    "requeue": ("_lib_jobs", "_lib_flush"),
    "cancel": ("_lib_jobs", "_lib_flush"),
    "route": ("_lib",),
    "acquire_slot": ("_lib_slots",),
    "renew_slots": ("_lib_slots",),
    "release_slots": ("_lib_slots",),
    "leave_line": ("_lib",),
}
#: The operations: the files that register a function, each under its file's name.
NAMES = tuple(name for name in NEEDS if not name.startswith("_lib"))


class LibraryError(Exception):
    """The library's files and ``NEEDS`` disagree (a fault of this package, not of its user)."""


def parts(needs: dict[str, tuple[str, ...]], files: set[str]) -> list[str]:
    """The files of ``needs`` in loading order: each after the files it needs, otherwise in the
    order of ``needs``. ``files`` are the names present; every one must be in ``needs``, and
    every one ``needs`` names must be present."""
    unlisted = sorted(files - needs.keys())
    if unlisted:
        raise LibraryError(
            f"lua/{unlisted[0]}.lua is not in scripts.NEEDS: add it with the files it needs"
        )
    order: list[str] = []
    visiting: list[str] = []

    def visit(name: str, wanted_by: str) -> None:
        if name in order:
            return
        if name in visiting:
            cycle = " -> ".join([*visiting[visiting.index(name) :], name])
            raise LibraryError(f"the library's files need each other in a circle: {cycle}")
        if name not in files:
            raise LibraryError(
                f"lua/{name}.lua, which {wanted_by} needs, is missing: restore it or drop "
                f"it from scripts.NEEDS"
            )
        visiting.append(name)
        for needed in needs.get(name, ()):
            visit(needed, f"lua/{name}.lua")
        visiting.pop()
        order.append(name)

    for name in needs:
        visit(name, "scripts.NEEDS")
    return order


def _read(filename: str) -> str:
    return (resources.files("fairq.backends.redis") / "lua" / filename).read_text("utf-8")


class Library:
    """The library's source and name, and a call that loads it when the server lacks it."""

    def __init__(self, body: str) -> None:
        consts = (
            f"local LAYOUT = '{LAYOUT}'\nlocal REPLY_TTL = '{REPLY_TTL_MS}'\n"
            f"local FIG_BUCKETS = {len(histogram.BOUNDS)}\nlocal FIG_TTL = '{FIGURES_TTL}'\n"
            f"local QUEUE_KEYS = {len(QUEUE_PARTS) + 1}\n"  # a block: the parts, then figures
            f"local COST_WINDOW, COST_TRUSTED = {cost.WINDOW}, {cost.TRUSTED}\n"
            f"local COST_OUTLIER = {float(cost.OUTLIER)!r}\n"
            f"{body}"
        )
        self.name = "fairq_" + hashlib.sha1(consts.encode()).hexdigest()[:16]
        self.source = f"#!lua name={self.name}\nlocal LIBRARY = '{self.name}'\n{consts}"

    def function(self, op: str) -> str:
        return f"{self.name}_{op}"

    def load(self, client: redis.Redis) -> None:
        client.function_load(self.source, replace=True)

    def __call__(
        self, client: redis.Redis, op: str, keys: Sequence[str], args: Sequence[Arg]
    ) -> Any:
        name = self.function(op)
        try:
            return client.fcall(name, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            if not missing(exc):
                raise
            self.load(client)
            return client.fcall(name, len(keys), *keys, *args)

    async def acall(self, client: Any, op: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """``__call__`` with a ``redis.asyncio`` client."""
        name = self.function(op)
        try:
            return await client.fcall(name, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            if not missing(exc):
                raise
            await client.function_load(self.source, replace=True)
            return await client.fcall(name, len(keys), *keys, *args)

    def command(self, op: str, keys: Sequence[str], args: Sequence[Arg]) -> tuple[Arg, ...]:
        """The words of a call, for a connection's own pipelining (cluster.per_master)."""
        return ("FCALL", self.function(op), len(keys), *keys, *args)

    def pipe(self, pipe: Pipeline, op: str, keys: Sequence[str], args: Sequence[Arg]) -> None:
        """Queue a call on ``pipe``; its reply goes through ``answer``."""
        pipe.fcall(self.function(op), len(keys), *keys, *args)

    def answer(
        self, client: redis.Redis, reply: Any, op: str, keys: Sequence[str], args: Sequence[Arg]
    ) -> Any:
        """The reply of a pipelined call; when the server lacked the library, the reply of
        the call made again (on ``client``) once it is loaded."""
        if not isinstance(reply, Exception):
            return reply
        if isinstance(reply, redis.ResponseError) and missing(reply):
            return self(client, op, keys, args)
        raise reply


def missing(exc: redis.ResponseError) -> bool:
    """Whether the server lacks the function called (the library is not loaded there)."""
    return "function not found" in str(exc).lower()


@cache
def library() -> Library:
    """The operations library (read from the package once per process)."""
    files = {
        entry.name.removesuffix(".lua")
        for entry in (resources.files("fairq.backends.redis") / "lua").iterdir()
        if entry.name.endswith(".lua")
    }
    return Library("\n".join(_read(f"{name}.lua") for name in parts(NEEDS, files)))
