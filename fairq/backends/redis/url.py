"""``redis://`` and ``rediss://`` URLs: fairq's own options (``prefix``, ``clock``,
``cluster``, ...) taken out, the rest left to redis-py, whose options are checked by name."""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis

from fairq.backends.clock import Clock, parse_clock
from fairq.errors import ConfigError
from fairq.policy.bounds import read_int
from fairq.urls import check_query

from .keys import DEFAULT_PREFIX, check_prefix

#: fairq's own URL options; the rest of the query string goes to redis-py.
OWN_OPTIONS = (
    "prefix", "max_payload_bytes", "clock", "cluster", "cluster_nodes", "wait_replicas",
    "wait_timeout",
)  # fmt: skip
DEFAULT_BACKEND_MAX_PAYLOAD = 16 * 1024 * 1024
#: How long an enqueue waits for ``wait_replicas`` replicas by default (seconds).
DEFAULT_WAIT_TIMEOUT = 1.0
_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


@dataclass(frozen=True, kw_only=True)
class RedisOptions:
    client_url: str  # the URL for redis-py, without fairq's own options
    safe_url: str  # the URL with its password hidden, for messages
    prefix: str = DEFAULT_PREFIX
    max_payload_bytes: int = DEFAULT_BACKEND_MAX_PAYLOAD
    clock: Clock = Clock.STORE  # whose clock stamps an event (fairq/backends/clock.py)
    cluster: bool = False  # a Redis Cluster (``?cluster=1``)
    seeds: tuple[tuple[str, int], ...] = ()  # a Cluster's nodes to start from, beyond the URL's
    wait_replicas: int = 0  # an enqueue waits until this many replicas have it (WAIT)
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT  # … for at most this long (seconds)


def parse_url(url: str) -> RedisOptions:
    """Split ``redis://…?prefix=p&max_payload_bytes=n`` into fairq's options and redis-py's URL.

    ``cluster=1`` (with ``cluster_nodes=host:port,…``, more nodes to start from) opens a Redis
    Cluster; ``wait_replicas=n`` (with ``wait_timeout=seconds``) makes an enqueue wait until n
    replicas have its jobs (docs/redis.md: what asynchronous replication can lose).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("redis", "rediss", "unix"):
        raise ConfigError(f"not a Redis URL: {redact(url)!r}")
    check_query(
        url,
        {"fairq": OWN_OPTIONS, "redis-py": list(redis.connection.URL_QUERY_ARGUMENT_PARSERS)},
        more=_client_options(parts.scheme.lower()),
    )
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in OWN_OPTIONS}
    rest = [(k, v) for k, v in query if k not in OWN_OPTIONS]
    client_url = urlunsplit(parts._replace(query=urlencode(rest)))
    limit = read_int(
        own.get("max_payload_bytes", str(DEFAULT_BACKEND_MAX_PAYLOAD)),
        "max_payload_bytes in the Redis URL",
        least=64,
    )
    cluster = _flag(own.get("cluster", ""), "cluster")
    if cluster:
        _check_cluster_url(url, client_url)
    elif "cluster_nodes" in own:
        raise ConfigError(
            f"cluster_nodes in the Redis URL {redact(url)!r} names a Redis Cluster's nodes; "
            "add cluster=1 to connect to a cluster"
        )
    replicas = read_int(own.get("wait_replicas", "0"), "wait_replicas in the Redis URL", least=0)
    return RedisOptions(
        client_url=client_url,
        safe_url=redact(url),
        prefix=check_prefix(own.get("prefix", DEFAULT_PREFIX)),
        max_payload_bytes=limit,
        clock=parse_clock(own.get("clock")),
        cluster=cluster,
        seeds=_seeds(own.get("cluster_nodes", "")),
        wait_replicas=replicas,
        wait_timeout=_seconds(own.get("wait_timeout", str(DEFAULT_WAIT_TIMEOUT)), "wait_timeout"),
    )


@functools.cache
def _client_options(scheme: str) -> frozenset[str]:
    """Every keyword redis-py's connection for this scheme takes (a URL's query parameters
    become its keywords: one it does not take is a TypeError at the first command). Once per
    process: ``inspect.signature`` of a builtin costs milliseconds (an RQ work horse opens
    its own store per job; ``preload``)."""
    kind = {"rediss": redis.SSLConnection, "unix": redis.UnixDomainSocketConnection}
    taken = {"max_connections"}  # the pool's own
    for cls in kind.get(scheme, redis.Connection).__mro__:
        init = cls.__dict__.get("__init__")
        if init is not None:
            taken |= {
                p.name
                for p in inspect.signature(init).parameters.values()
                if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
            }
    return frozenset(taken)


def _flag(value: str, name: str) -> bool:
    if value.lower() in _YES:
        return True
    if value.lower() in _NO:
        return False
    raise ConfigError(f"{name} in the Redis URL must be 1 or 0 (true/false, yes/no), got {value!r}")


def _seconds(value: str, name: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < 3600:
        raise ConfigError(f"{name} in the Redis URL must be seconds, > 0, got {value!r}")
    return seconds


def _check_cluster_url(url: str, client_url: str) -> None:
    """A Cluster is reached over TCP, and has database 0 only."""
    parts = urlsplit(client_url)
    if parts.scheme.lower() == "unix":
        raise ConfigError(
            f"a Redis Cluster is reached over TCP, not a unix socket: use "
            f"redis://host:port/?cluster=1 (got {redact(url)!r})"
        )
    if not parts.hostname:
        raise ConfigError(f"the Redis URL {redact(url)!r} names no host of the cluster")
    if database(client_url) != "0":
        raise ConfigError(
            f"a Redis Cluster has database 0 only, and the URL {redact(url)!r} names database "
            f"{database(client_url)}; drop it (or use a key prefix: ?prefix=…)"
        )


def _seeds(text: str) -> tuple[tuple[str, int], ...]:
    seeds: list[tuple[str, int]] = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"cluster_nodes in the Redis URL must be host:port pairs separated by commas, "
                f"got {entry!r}"
            )
        seeds.append((host.strip("[]"), int(port)))
    return tuple(seeds)


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = re.sub(r":[^:@]*@", ":***@", parts.netloc, count=1)
    return urlunsplit(parts._replace(netloc=netloc))


def database(url: str) -> str:
    """The database number a Redis URL names (its path, or ``?db=``)."""
    parts = urlsplit(url)
    return dict(parse_qsl(parts.query)).get("db") or parts.path.strip("/") or "0"
