"""The Redis store: one Lua function per state change, every queue in one Cluster slot.

``RedisBackend.from_url("redis://localhost:6379/0?prefix=fairq")``. Layout: keys.py.
"""

from __future__ import annotations

from fairq.backends.redis.backend import RedisBackend
from fairq.backends.redis.scripts import library
from fairq.backends.redis.url import parse_url

__all__ = ["RedisBackend", "preload"]


def preload(url: str) -> None:
    """Do now, opening nothing, the work every store opened later in this process, or in a
    child forked from it (an RQ work horse), would repeat: parse the URL (the client's keywords)
    and read the operations library."""
    parse_url(url)
    library()
