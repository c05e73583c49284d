"""A Redis Cluster client (``?cluster=1``): redis-py's RedisCluster, with what fairq needs on top.

* Every FCALL fairq sends names keys of one slot only (keys.py), so its slot is that of its
  first key: redis-py would ask the server (COMMAND GETKEYS, a round trip) for every FCALL.
* The functions library is loaded on every master (FUNCTION LOAD goes to all of them); a master
  that lacks it (a node added later) gets it on the first call that finds it missing
  (scripts.py). A replica has its master's functions (replicated, and in its full sync), so a
  replica promoted by a failover serves fairq's calls at once.
* ``replicated``: calls followed by WAIT on the same connection of each master, for
  ``?wait_replicas=n``.

redis-py retries a call that failed on a connection (a master that died) after refreshing the
slots' owners, up to the Retry's count; fairq's calls are safe to send again (register_once in
_lib.lua).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ClusterDownError, MovedError, RedisClusterException, TryAgainError

from fairq.errors import ConfigError, StoreUnavailable

from .connection import (
    BACKOFF_CAP,
    CONNECT_TIMEOUT,
    READ_TIMEOUT,
    RETRIES,
    RedisOptions,
    retry,
)
from .keys import key_slot
from .scripts import Library, missing


class NotReplicated(StoreUnavailable):
    """An enqueue's jobs are stored on their master, but fewer replicas than ``wait_replicas``
    confirmed them within ``wait_timeout``: a failover of that master now could lose them."""


def _fcall_keys(args: tuple[Any, ...]) -> list[Any] | None:
    """An FCALL's keys, read from its arguments (FCALL function numkeys key... arg...)."""
    if args and args[0] in ("FCALL", "FCALL_RO") and len(args) > 2:
        return list(args[3 : 3 + int(args[2])])
    return None


class ClusterClient(RedisCluster):
    """RedisCluster that reads an FCALL's keys from its arguments: redis-py asks the server
    (COMMAND GETKEYS, a round trip) for every FCALL, pipelined ones too. fairq's FCALLs name
    keys of one slot only, so an FCALL's slot is that of its first key."""

    def determine_slot(self, *args: Any) -> int | None:
        keys = _fcall_keys(args)
        return key_slot(keys[0]) if keys else super().determine_slot(*args)

    def _get_command_keys(self, *args: Any) -> Any:
        keys = _fcall_keys(args)
        base: Any = RedisCluster._get_command_keys  # untyped in redis-py
        return keys if keys is not None else base(self, *args)

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        base: Any = RedisCluster.pipeline  # untyped in redis-py
        pipe = base(self, transaction, shard_hint)
        plain_slot, plain_keys = pipe.determine_slot, pipe._get_command_keys

        def determine_slot(*args: Any) -> int | None:
            keys = _fcall_keys(args)
            return key_slot(keys[0]) if keys else plain_slot(*args)

        def get_command_keys(*args: Any) -> Any:
            keys = _fcall_keys(args)
            return keys if keys is not None else plain_keys(*args)

        pipe.determine_slot, pipe._get_command_keys = determine_slot, get_command_keys
        return pipe


def open_cluster(options: RedisOptions, *, blocking: bool = False) -> ClusterClient:
    """A Cluster client; ``blocking`` ones have no read timeout (for BLPOP, waiting.py)."""
    node: Any = ClusterNode  # untyped in redis-py
    nodes = [node(host, port) for host, port in options.seeds]
    try:
        client: ClusterClient = ClusterClient.from_url(  # type: ignore[assignment]
            options.client_url,
            startup_nodes=nodes or None,
            decode_responses=False,
            retry=retry(),
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=None if blocking else READ_TIMEOUT,
            socket_keepalive=True,
        )
        return client
    except RedisClusterException as exc:
        raise translated(options.safe_url, exc) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnavailable(f"cannot reach Redis Cluster at {options.safe_url}: {exc}") from exc


def translated(safe_url: str, exc: RedisClusterException) -> Exception:
    """redis-py's own cluster errors (which are not RedisErrors) as fairq's."""
    if "not enabled" in str(exc):
        return ConfigError(
            f"Redis at {safe_url} is not a Redis Cluster node (cluster mode is off); "
            "drop cluster=1 from the URL"
        )
    return StoreUnavailable(f"cannot reach Redis Cluster at {safe_url}: {exc}")


def servers(client: ClusterClient, *sections: str) -> list[dict[str, Any]]:
    """``INFO sections`` of every master."""
    found = client.info(*sections, target_nodes=RedisCluster.PRIMARIES)
    if found and all(isinstance(v, dict) for v in found.values()) and "redis_version" not in found:
        return list(found.values())
    return [found]


#: A command to send: a key it names (which fixes its slot), and what queues it on a pipeline.
Send = tuple[str, Callable[[Any], None]]
#: Replies of a replicated command: the errors after which it is sent again.
_RESEND = (MovedError, TryAgainError, ClusterDownError, redis.ConnectionError, redis.TimeoutError)


def replicated(
    client: Any, library: Library, sends: Sequence[Send], replicas: int, timeout: float
) -> list[Any]:
    """Send commands that are safe to send again (functions registered with register_once,
    HSETNX under a nonce: directory.py), each master's in one pipeline ended by ``WAIT
    replicas timeout``, which waits for what that connection wrote; their replies, in order.
    NotReplicated when a master's WAIT counted fewer replicas.

    A single Redis (``client`` not a cluster) is one pipeline; on a Cluster a command whose
    slot moved or whose master failed is sent again once the owners are refreshed, as redis-py
    does. A master that lacks the functions library gets it, and its pipeline is sent again.
    """
    millis = max(1, int(timeout * 1000))
    for attempt in range(RETRIES + 1):
        try:
            return _replicated_once(client, library, sends, replicas, millis)
        except _RESEND:
            if attempt == RETRIES or not isinstance(client, RedisCluster):
                raise
            time.sleep(min(BACKOFF_CAP, 0.05 * 2**attempt))
            client.nodes_manager.initialize()
    raise AssertionError("unreachable")


def _replicated_once(
    client: Any, library: Library, sends: Sequence[Send], replicas: int, millis: int
) -> list[Any]:
    by_node: dict[str, list[int]] = {}
    nodes: dict[str, Any] = {}
    for at, (key, _) in enumerate(sends):
        if isinstance(client, RedisCluster):
            node = client.nodes_manager.get_node_from_slot(key_slot(key))
            name, nodes[node.name] = node.name, client.get_redis_connection(node)
        else:
            name, nodes[""] = "", client
        by_node.setdefault(name, []).append(at)
    replies: list[Any] = [None] * len(sends)
    for name, positions in by_node.items():
        for _ in range(2):  # once more after loading the library, if a master lacked it
            pipe = nodes[name].pipeline(transaction=False)
            for at in positions:
                sends[at][1](pipe)
            pipe.execute_command("WAIT", replicas, millis)
            *answers, acked = pipe.execute(raise_on_error=False)
            lacking = [a for a in answers if isinstance(a, redis.ResponseError) and missing(a)]
            if not lacking:
                break
            library.load(client)
        for at, answer in zip(positions, answers, strict=True):
            if isinstance(answer, Exception):
                raise answer
            replies[at] = answer
        if isinstance(acked, Exception):
            raise acked
        if int(acked) < replicas:
            raise NotReplicated(
                f"only {acked} of the {replicas} replicas asked for (wait_replicas) confirmed "
                f"the writes within {millis} ms"
            )
    return replies
