"""A reply lost with its connection: redis-py sends the command again on a new connection.

A proxy between the backend and the test Redis drops the connection right after forwarding
one enqueue, so the server stores the jobs and the client never hears so.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import redis
from redis_helpers import CuttingProxy, new_job

from fairq.backends.redis import RedisBackend
from fairq.contract import EnqueueParams
from fairq.errors import DuplicateJob


@pytest.fixture
def proxy(redis_url: str, raw: redis.Redis) -> Iterator[CuttingProxy]:
    cutter = CuttingProxy(urlsplit(redis_url).port or 6379, marker=b"_enqueue")
    yield cutter
    cutter.close()


def test_an_enqueue_sent_again_after_its_reply_was_lost_succeeds_once(
    proxy: CuttingProxy, redis_url: str, prefix: str
) -> None:
    database = urlsplit(redis_url).path or "/0"
    backend = RedisBackend.from_url(f"redis://127.0.0.1:{proxy.port}{database}?prefix={prefix}")
    try:
        backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=1.0))  # loads the library
        proxy.armed.set()
        jobs = [new_job(1, "a"), new_job(2, "b", queue="other")]
        assert backend.enqueue(EnqueueParams(jobs=jobs, now=time.time())) == ["default", "other"]
        assert proxy.cuts == 1  # the first sending did reach the server, and was cut
        assert [info.id for info in backend.get_jobs(["j1", "j2"])] == ["j1", "j2"]
        # A real duplicate is still refused, even one identical to what is stored: only a
        # command redis-py sent again is taken for its own first sending.
        with pytest.raises(DuplicateJob, match="j0"):
            backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=1.0))
        with pytest.raises(DuplicateJob, match="j1"):
            backend.enqueue(EnqueueParams(jobs=[new_job(1, "a")], now=time.time()))
    finally:
        backend.close()
