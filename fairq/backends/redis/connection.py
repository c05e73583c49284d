"""Opening a Redis client: URL options, retries, the version check, and error translation.

Connection failures are retried by redis-py with jittered exponential back-off (a killed
connection is re-opened transparently); what still fails becomes ``StoreUnavailable`` naming
the URL with its password hidden, so logs never carry a secret. ``?cluster=1`` opens a Redis
Cluster client instead (cluster.py).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from fairq.backends.clock import Clock, parse_clock
from fairq.errors import ConfigError, FairqError, SchemaError, StoreUnavailable
from fairq.policy.bounds import read_int
from fairq.urls import check_query

from .keys import DEFAULT_PREFIX, check_prefix

log = logging.getLogger("fairq.backends.redis")

T = TypeVar("T")

#: Redis Functions (FUNCTION LOAD, FCALL) are in 7.0, as is everything else fairq uses.
MIN_VERSION = (7, 0, 0)
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


def _client_options(scheme: str) -> set[str]:
    """Every keyword redis-py's connection for this scheme takes (a URL's query parameters
    become its keywords: one it does not take is a TypeError at the first command)."""
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
    return taken


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
    if _database(client_url) != "0":
        raise ConfigError(
            f"a Redis Cluster has database 0 only, and the URL {redact(url)!r} names database "
            f"{_database(client_url)}; drop it (or use a key prefix: ?prefix=…)"
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


#: redis-py's retries of a lost connection: up to RETRIES more sendings of a command, each after
#: a back-off of at most BACKOFF_CAP s, a connect of at most CONNECT_TIMEOUT s and a reply
#: awaited at most READ_TIMEOUT s.
RETRIES, BACKOFF_CAP, CONNECT_TIMEOUT, READ_TIMEOUT = 8, 2.0, 5.0, 30.0
#: How long Redis keeps a call's reply for its re-sendings (``register_once`` in _lib.lua):
#: longer than all of redis-py's retries of one command can take.
REPLY_TTL_MS = int(RETRIES * (BACKOFF_CAP + CONNECT_TIMEOUT + READ_TIMEOUT) * 1000)


def retry() -> Retry:
    return Retry(backoff(), retries=RETRIES)


def open_client(options: RedisOptions, *, blocking: bool = False) -> redis.Redis:
    """A client of one Redis that retries lost connections with back-off (about 10 s in all).

    ``blocking`` clients have no read timeout, for BLPOP (its own timeout bounds the wait).
    """
    return redis.Redis.from_url(options.client_url, retry=retry(), **client_settings(blocking))


def backoff() -> ExponentialWithJitterBackoff:
    return ExponentialWithJitterBackoff(base=0.05, cap=BACKOFF_CAP)


def _driver_info() -> dict[str, Any]:
    """redis-py's name and version, read once: redis-py 8 otherwise reads its package metadata
    for every new connection (about 2 ms of CPU), and a forked RQ work horse opens the store's
    connections anew for every job. Older redis-py reads it once, at import."""
    try:
        from redis.driver_info import DriverInfo
    except ImportError:  # pragma: no cover - redis-py before 7
        return {}
    return {"driver_info": DriverInfo()}


_DRIVER = _driver_info()


def client_settings(blocking: bool = False) -> dict[str, Any]:
    """The settings of every client, blocking or ``redis.asyncio`` (aio.py), but its retry."""
    return {
        **_DRIVER,
        "decode_responses": False,
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": None if blocking else READ_TIMEOUT,
        "socket_keepalive": True,
        "health_check_interval": 0 if blocking else 30,
    }


def check_version(version: str) -> tuple[int, ...]:
    """Raise StoreUnavailable unless ``version`` (INFO's redis_version) is new enough."""
    try:
        found = tuple(int(part) for part in version.split(".")[:3])
    except ValueError:
        raise StoreUnavailable(f"cannot read the Redis server version {version!r}") from None
    if found < MIN_VERSION:
        need = ".".join(map(str, MIN_VERSION))
        raise StoreUnavailable(
            f"Redis {version} is too old for fairq: it needs Redis {need} or newer "
            "(Redis Functions: FUNCTION LOAD and FCALL); upgrade the server"
        )
    return found


def check_eviction(safe_url: str, policy: str, maxmemory: int) -> None:
    """Warn (once per server and process) when Redis may evict fairq's keys: an evicted job
    is lost and a tenant's counters stop adding up. Only ``allkeys-*`` policies evict keys
    without a TTL (all of fairq's but throttle windows), and only with a ``maxmemory``. Only a
    warning: the operator owns the server, and a managed one may not let us read or set it."""
    if not (policy.startswith("allkeys-") and maxmemory > 0) or safe_url in _warned_eviction:
        return
    _warned_eviction.add(safe_url)
    log.warning(
        "Redis at %s has maxmemory-policy %s: under memory pressure it may delete fairq's keys, "
        "losing jobs. Set maxmemory-policy noeviction (docs/redis.md)",
        safe_url,
        policy,
        extra={"action": "redis_eviction_policy"},
    )


_warned_eviction: set[str] = set()


@contextmanager
def translated(safe_url: str) -> Iterator[None]:
    """Turn redis-py's errors into fairq's, naming the store without its password."""
    try:
        yield
    except FairqError:
        raise
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnavailable(f"cannot reach Redis at {safe_url}: {exc}") from exc
    except redis.ResponseError as exc:
        if "DB index is out of range" in str(exc):
            raise ConfigError(
                f"Redis at {safe_url} has no database {_database(safe_url)}: the server has "
                "fewer (its 'databases' setting, 16 by default: 0 to 15); use a lower number"
            ) from None
        if str(exc).startswith("NOREPLICAS"):
            raise StoreUnavailable(
                f"Redis at {safe_url} refused the write: fewer replicas are in sync than its "
                f"min-replicas-to-write asks ({exc}); nothing was changed"
            ) from exc
        if "WRONGTYPE" in str(exc):
            raise SchemaError(
                f"Redis at {safe_url} holds a key of another type where fairq keeps its "
                f"data ({exc}); use another key prefix (?prefix=…) or database"
            ) from exc
        raise


def _database(url: str) -> str:
    """The database number a Redis URL names (its path, or ``?db=``)."""
    parts = urlsplit(url)
    return dict(parse_qsl(parts.query)).get("db") or parts.path.strip("/") or "0"


def call(safe_url: str, fn: Callable[..., T], *args: Any) -> T:
    with translated(safe_url):
        return fn(*args)
