"""``AsyncRedisStore`` refuses a store it cannot drive (wait_replicas here; a Cluster too),
naming the fix; ``open_async_store`` gives such a store a thread instead."""

from __future__ import annotations

import os

import pytest

from fairq.backends.aio import Offloaded, open_async_store
from fairq.backends.redis import RedisBackend
from fairq.backends.redis.aio import AsyncRedisStore
from fairq.errors import ConfigError


def test_async_redis_store_refuses_wait_replicas_and_offloads() -> None:
    url = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    sep = "&" if "?" in url else "?"
    store = RedisBackend.from_url(f"{url}{sep}wait_replicas=1&wait_timeout=0.1")
    try:
        with pytest.raises(ConfigError, match="open_async_store"):
            AsyncRedisStore(store)
        assert type(open_async_store(store)) is Offloaded
    finally:
        store.close()
