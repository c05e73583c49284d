"""Redis Cluster URLs (``?cluster=1``): what is accepted, and the error a wrong one gets."""

from __future__ import annotations

import os

import pytest

from fairq import App
from fairq.backends.redis import RedisBackend
from fairq.backends.redis.url import parse_url
from fairq.errors import ConfigError

from .servers import LocalCluster


def test_a_cluster_url_names_its_nodes_to_start_from() -> None:
    options = parse_url("redis://:pw@10.0.0.1:7000/?cluster=1&cluster_nodes=10.0.0.2:7001,h:7002")
    assert options.cluster and options.seeds == (("10.0.0.2", 7001), ("h", 7002))
    assert "cluster" not in options.client_url and "pw" not in options.safe_url
    assert not parse_url("redis://h:6379/0?cluster=0").cluster
    assert parse_url("redis://h:6379?cluster=yes&wait_replicas=1").wait_replicas == 1


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("redis://h:7000/?cluster=maybe", "cluster in the Redis URL must be 1 or 0"),
        ("unix:///tmp/redis.sock?cluster=1", "over TCP, not a unix socket"),
        ("redis://h:7000/3?cluster=1", "database 0 only"),
        ("redis://h:7000/?db=2&cluster=1", "database 0 only"),
        ("redis://h:7000/?cluster_nodes=h:7001", "add cluster=1"),
        ("redis://h:7000/?cluster=1&cluster_nodes=h", "host:port pairs"),
        ("redis://h:7000/?cluster=1&cluster_nodes=h:port", "host:port pairs"),
        ("redis://h:7000/?wait_replicas=-1", "wait_replicas in the Redis URL"),
        ("redis://h:7000/?wait_replicas=1&wait_timeout=0", "wait_timeout in the Redis URL"),
        ("redis://h:7000/?wait_timeout=soon", "wait_timeout in the Redis URL"),
    ],
)
def test_a_bad_cluster_url_is_refused_naming_the_problem(url: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_url(url)


def test_a_plain_url_to_a_cluster_node_asks_for_cluster_1(cluster: LocalCluster) -> None:
    with pytest.raises(ConfigError, match="is a Redis Cluster node: add cluster=1"):
        RedisBackend.from_url(f"redis://127.0.0.1:{cluster.ports[0]}/0")


def test_a_cluster_url_to_a_plain_redis_asks_to_drop_it() -> None:
    url = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    base = url.rsplit("/", 1)[0]
    with pytest.raises(ConfigError, match="not a Redis Cluster node"):
        RedisBackend.from_url(f"{base}/0?cluster=1")


def test_an_app_opens_a_cluster_url(cluster: LocalCluster, prefix: str) -> None:
    app = App(f"{cluster.url}&prefix={prefix}")
    try:

        @app.job(name="hello", tenant="tenant")
        def hello(tenant: str) -> None: ...

        job_id = hello.options(queue="q2").enqueue("t1")
        info = app.job_info(job_id)
        assert info is not None and (info.queue, info.tenant) == ("q2", "t1")
    finally:
        app.close()
