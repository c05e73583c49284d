"""Fixtures for the Redis backend's own tests (the shared rules are in tests/conformance).

The server is ``$FAIRQ_TEST_REDIS_URL`` (default database 9 of a local Redis). The database is
emptied before and after each test; an unreachable server fails the test, never skips it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from fairq.backends.redis import RedisBackend

DEFAULT_URL = "redis://127.0.0.1:6379/9"


@pytest.fixture
def redis_url() -> str:
    return os.environ.get("FAIRQ_TEST_REDIS_URL", DEFAULT_URL)


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    """A plain client on the test database, emptied before and after the test."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture
def make_backend(
    redis_url: str, raw: redis.Redis, prefix: str
) -> Iterator[Callable[..., RedisBackend]]:
    """Opens backends on the test database (URL options as keyword arguments). Their clock is
    the caller's (``clock=caller``): tests drive a virtual clock; ``clock="store"`` for the
    server's."""
    opened: list[RedisBackend] = []

    def make(**options: object) -> RedisBackend:
        query = "&".join(
            f"{k}={v}" for k, v in {"prefix": prefix, "clock": "caller", **options}.items()
        )
        backend = RedisBackend.from_url(f"{redis_url}?{query}")
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        backend.close()


@pytest.fixture
def backend(make_backend: Callable[..., RedisBackend]) -> RedisBackend:
    return make_backend()
