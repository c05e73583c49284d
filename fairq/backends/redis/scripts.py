"""The Lua scripts: read from ``lua/*.lua`` once, run by SHA, reloaded after NOSCRIPT.

Each operation is one script file; ``_lib.lua`` and ``_lib_jobs.lua`` (shared local functions,
in that order) are prepended to it, so a script is self-contained on the server. Scripts run
with EVALSHA; when the server has forgotten them (restart, ``SCRIPT FLUSH``, failover) the
NOSCRIPT reply makes us load the source and try once more, which is safe because a script
that is not loaded did not run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.exceptions import NoScriptError

Arg = str | bytes | int | float

_LIBS = ("_lib.lua", "_lib_jobs.lua")
NAMES = (
    "enqueue",
    "dequeue",
    "ack",
    "ack_many",
    "fail",
    "release",
    "heartbeat",
    "maintain",
    "set_queue",
    "set_tenant",
    "requeue",
    "route",
)


def _read(filename: str) -> str:
    return (resources.files("fairq.backends.redis") / "lua" / filename).read_text("utf-8")


class Script:
    """One operation script: its full source, its SHA1, and a call that survives NOSCRIPT."""

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, client: redis.Redis, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)


@cache
def scripts() -> dict[str, Script]:
    """Every operation script, by name (read from the package once per process)."""
    lib = "\n".join(_read(name) for name in _LIBS)
    return {name: Script(name, lib + "\n" + _read(f"{name}.lua")) for name in NAMES}
