"""The Redis store: one Lua function per state change, every queue in one Cluster slot.

``RedisBackend.from_url("redis://localhost:6379/0?prefix=fairq")``. Layout: keys.py.
"""

from __future__ import annotations

from fairq.backends.redis.backend import RedisBackend

__all__ = ["RedisBackend"]
