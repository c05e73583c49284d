"""Opening a Redis client: retries, the version check, and error translation (its URL's
options: url.py).

Connection failures are retried by redis-py with jittered exponential back-off (a killed
connection is re-opened transparently); what still fails becomes ``StoreUnavailable`` naming
the URL with its password hidden, so logs never carry a secret. ``?cluster=1`` opens a Redis
Cluster client instead (cluster.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from fairq.errors import ConfigError, FairqError, SchemaError, StoreUnavailable

from .url import RedisOptions, database

log = logging.getLogger("fairq.backends.redis")

T = TypeVar("T")

#: Redis Functions (FUNCTION LOAD, FCALL) are in 7.0, as is everything else fairq uses.
MIN_VERSION = (7, 0, 0)
#: redis-py's retries of a lost connection: up to RETRIES more sendings of a command, each after
#: a back-off of at most BACKOFF_CAP s, a connect of at most CONNECT_TIMEOUT s and a reply
#: awaited at most READ_TIMEOUT s.
RETRIES, BACKOFF_CAP, CONNECT_TIMEOUT, READ_TIMEOUT = 8, 2.0, 5.0, 30.0
#: How long Redis keeps a call's reply for its re-sendings (``register_once`` in _lib.lua):
#: longer than all of redis-py's retries of one command can take.
REPLY_TTL_MS = int(RETRIES * (BACKOFF_CAP + CONNECT_TIMEOUT + READ_TIMEOUT) * 1000)
#: Opening a store is tried OPEN_RETRIES more times (well under a second of back-off): a server
#: that refuses the first contact is down or the URL is wrong, and ``fairq stats`` or a worker's
#: start should say so at once, not after the 10 s that ride out a restart once connected.
OPEN_RETRIES = 2


def retry() -> Retry:
    return Retry(backoff(), retries=RETRIES)


@contextmanager
def opening(client: redis.Redis) -> Iterator[None]:
    """``client``'s first contact, tried OPEN_RETRIES more times only; then its usual retry."""
    client.set_retry(Retry(backoff(), retries=OPEN_RETRIES))
    try:
        yield
    finally:
        client.set_retry(retry())


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
                f"Redis at {safe_url} has no database {database(safe_url)}: the server has "
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


def call(safe_url: str, fn: Callable[..., T], *args: Any) -> T:
    with translated(safe_url):
        return fn(*args)
