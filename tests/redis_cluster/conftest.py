"""Fixtures for the Redis Cluster tests: the local cluster of the test run (servers.shared:
three masters with a replica each, started on first use), emptied before each test.

A missing ``redis-server`` or ``redis-cli`` fails these tests, never skips them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from fairq.backends.redis import RedisBackend

from .servers import LocalCluster, shared


@pytest.fixture(scope="session")
def cluster() -> LocalCluster:
    return shared()


@pytest.fixture
def prefix() -> str:
    return f"c{uuid.uuid4().hex[:8]}"


@pytest.fixture
def make_backend(cluster: LocalCluster, prefix: str) -> Iterator[Callable[..., RedisBackend]]:
    """Opens backends on the cluster (URL options as keyword arguments), every master emptied
    first; their clock is the caller's (``clock=caller``) unless ``clock="store"``."""
    opened: list[RedisBackend] = []

    def make(**options: object) -> RedisBackend:
        query = "&".join(
            f"{k}={v}" for k, v in {"prefix": prefix, "clock": "caller", **options}.items()
        )
        backend = RedisBackend.from_url(f"{cluster.url}&{query}")
        if not opened:
            backend.client.flushall()
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        backend.close()


@pytest.fixture
def backend(make_backend: Callable[..., RedisBackend]) -> RedisBackend:
    return make_backend()
