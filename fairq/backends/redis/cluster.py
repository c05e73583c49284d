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
from collections.abc import Sequence
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ClusterDownError, MovedError, RedisClusterException, TryAgainError

from fairq.errors import ConfigError, StoreUnavailable

from .db import BACKOFF_CAP, CONNECT_TIMEOUT, READ_TIMEOUT, RETRIES, retry
from .keys import key_slot
from .scripts import Library, missing
from .url import RedisOptions


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


#: A command to send: a key it names (which fixes its slot), and the command's words.
Send = tuple[str, tuple[Any, ...]]
#: Replies of a replicated command: the errors after which it is sent again.
_RESEND = (MovedError, TryAgainError, ClusterDownError, redis.ConnectionError, redis.TimeoutError)


def per_master(
    client: Any, library: Library, sends: Sequence[Send], wait: tuple[int, float] | None = None
) -> list[Any]:
    """Send commands that are safe to send again (functions registered with register_once,
    HSETNX under a nonce: directory.py), each master's on a connection of its own, all written
    before any reply is read (one round trip for all masters, and far less work per command
    than redis-py's cluster pipeline); their replies, in order. ``wait`` (replicas, timeout):
    each master's commands end with ``WAIT replicas timeout``, which waits for what that
    connection wrote; NotReplicated when a master's WAIT counted fewer.

    A single Redis (``client`` not a cluster) is one master. On a Cluster, commands whose slot
    moved or whose master failed are sent again once the owners are refreshed, as redis-py
    does. A master that lacks the functions library gets it, and its commands are sent again.
    """
    for attempt in range(RETRIES + 1):
        try:
            return _per_master_once(client, library, sends, wait)
        except _RESEND:
            if attempt == RETRIES or not isinstance(client, RedisCluster):
                raise
            time.sleep(min(BACKOFF_CAP, 0.05 * 2**attempt))
            client.nodes_manager.initialize()
    raise AssertionError("unreachable")


def _per_master_once(
    client: Any, library: Library, sends: Sequence[Send], wait: tuple[int, float] | None
) -> list[Any]:
    by_node: dict[Any, list[int]] = {}
    for at, (key, _) in enumerate(sends):
        if isinstance(client, RedisCluster):
            node = client.get_redis_connection(
                client.nodes_manager.get_node_from_slot(key_slot(key))
            )
        else:
            node = client
        by_node.setdefault(node, []).append(at)
    replies: list[Any] = [None] * len(sends)
    for _ in range(2):  # once more after loading the library, if a master lacked it
        answers = _exchange(by_node, sends, wait)
        if not any(isinstance(a, redis.ResponseError) and missing(a) for a in answers.values()):
            break
        library.load(client)
    for node, positions in by_node.items():
        for at in positions:
            if isinstance(answers[at], Exception):
                raise answers[at]
            replies[at] = answers[at]
        if wait is None:
            continue
        acked = answers[(id(node), "wait")]
        if isinstance(acked, Exception):
            raise acked
        if int(acked) < wait[0]:
            raise NotReplicated(
                f"only {acked} of the {wait[0]} replicas asked for (wait_replicas) "
                f"confirmed the writes within {wait[1]:g} s"
            )
    return replies


def _exchange(
    by_node: dict[Any, list[int]], sends: Sequence[Send], wait: tuple[int, float] | None
) -> dict[Any, Any]:
    """Write every master's commands, then read every reply: place -> reply (an error as its
    exception), and (id(node), "wait") -> a WAIT's count."""
    taken: list[tuple[Any, Any, list[int]]] = []
    try:
        for node, positions in by_node.items():
            connection = node.connection_pool.get_connection()
            taken.append((node, connection, positions))
            words = [sends[at][1] for at in positions]
            if wait is not None:
                words.append(("WAIT", wait[0], max(1, int(wait[1] * 1000))))
            connection.send_packed_command(connection.pack_commands(words))
        answers: dict[Any, Any] = {}
        for node, connection, positions in taken:
            for at in positions:
                answers[at] = _reply(connection)
            if wait is not None:
                answers[(id(node), "wait")] = _reply(connection)
        return answers
    except BaseException:
        for _, connection, _ in taken:
            connection.disconnect()  # replies may be left unread on it
        raise
    finally:
        for node, connection, _ in taken:
            node.connection_pool.release(connection)


def _reply(connection: Any) -> Any:
    try:
        return connection.read_response()
    except redis.ResponseError as exc:  # MOVED, TRYAGAIN… are ResponseErrors too
        return exc
