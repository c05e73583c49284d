"""``?wait_replicas=n``: an enqueue waits until n replicas have its jobs (WAIT), on a single
Redis with a replica (the Cluster's side: tests/redis_cluster/test_cluster_directory.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis_helpers import free_port, new_job, start_server, wait_for

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.cluster import NotReplicated
from fairq.contract import EnqueueParams, GetJobsParams
from fairq.errors import StoreUnavailable


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[int]:
    """A private Redis with one replica in sync (files in ``tmp_path``): the primary's port."""
    port, other = free_port(), free_port()
    quiet = ("--save", "", "--appendonly", "no", "--dir", str(tmp_path))
    servers = [
        start_server(port, *quiet),
        start_server(other, *quiet, "--replicaof", "127.0.0.1", str(port)),
    ]
    replica = redis.Redis(port=other)
    wait_for(lambda: replica.info("replication")["master_link_status"] == "up", "the replica")
    yield port
    replica.close()
    for server in servers:
        server.kill()
        server.wait()


def test_an_enqueue_waits_for_the_replicas_asked(primary: int) -> None:
    url = f"redis://127.0.0.1:{primary}/0?clock=caller"
    one = RedisBackend.from_url(f"{url}&wait_replicas=1")
    two = RedisBackend.from_url(f"{url}&wait_replicas=2&wait_timeout=0.2")
    try:
        assert one.enqueue(EnqueueParams(jobs=[new_job(1)], now=0.0)).queues == ["default"]
        with pytest.raises(NotReplicated, match="the jobs are stored, but only 1 of the 2"):
            two.enqueue(EnqueueParams(jobs=[new_job(2)], now=0.0))
        found = one.get_jobs(GetJobsParams(ids=["j1", "j2"]))
        assert [job.id for job in found] == ["j1", "j2"]  # stored, as the error says
    finally:
        one.close()
        two.close()


def test_a_master_short_of_replicas_refuses_the_write(primary: int) -> None:
    """``min-replicas-to-write`` (docs/redis.md): the write is refused and nothing stored."""
    backend = RedisBackend.from_url(f"redis://127.0.0.1:{primary}/0?clock=caller")
    server = redis.Redis(port=primary)
    try:
        server.config_set("min-replicas-to-write", 2)
        with pytest.raises(StoreUnavailable, match="fewer replicas are in sync"):
            backend.enqueue(EnqueueParams(jobs=[new_job(1)], now=0.0))
        server.config_set("min-replicas-to-write", 0)
        assert backend.get_jobs(GetJobsParams(ids=["j1"])) == []
    finally:
        server.close()
        backend.close()
