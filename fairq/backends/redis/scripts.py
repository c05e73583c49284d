"""The Lua operations: one Redis Functions library, loaded once, called with FCALL.

The library is ``_lib.lua``, ``_lib_tenants.lua``, ``_lib_jobs.lua``, ``_lib_slots.lua`` and
``_lib_unique.lua`` (shared helpers, created once when the library is loaded rather than on
every call, which is what EVALSHA of a self-contained script paid for) followed by one file per
operation, each registering its function. The library's name carries a hash of its source
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

from .connection import REPLY_TTL_MS
from .keys import FIGURES_TTL, LAYOUT, QUEUE_PARTS

Arg = str | bytes | int | float

_LIBS = ("_lib.lua", "_lib_tenants.lua", "_lib_jobs.lua", "_lib_slots.lua", "_lib_unique.lua")
NAMES = (
    "enqueue",
    "dequeue",
    "ack_many",
    "ack_dequeue",  # after the two it calls
    "fail",
    "release",
    "heartbeat",
    "checkpoint",
    "maintain",
    "set_queue",
    "set_tenant",
    "requeue",
    "cancel",
    "route",
    "acquire_slot",
    "renew_slots",
    "release_slots",
)


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
    return Library("\n".join(_read(name) for name in (*_LIBS, *(f"{n}.lua" for n in NAMES))))
