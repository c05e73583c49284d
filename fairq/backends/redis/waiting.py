"""Waiting for work without polling: BLPOP on the queues' wake-up lists.

Scripts that make work available (a job becomes ready, a capped tenant gets a slot back)
LPUSH a few tokens to the queue's ``wake`` list and trim it to a bounded length. An idle
worker blocks in BLPOP on the lists of its queues, so it wakes within a round trip of the
change. A token may be stale (the work was taken by a busy worker): the woken worker then
finds nothing and waits again, which costs one dequeue. BLPOP holds its connection, so the
waiter has its own client without a read timeout, and waits in slices so a dead connection
is noticed.

A dequeue that waits (``wait_then``) is pipelined behind its BLPOP: Redis runs it the moment
the BLPOP returns, so the first job reaches an idle worker one round trip sooner.

On a Redis Cluster one BLPOP may name keys of one slot only, so ``ClusterWaiter`` sends one per
slot of the queues, each on a connection of its own to that slot's master, side by side; the
first to return ends the others with CLIENT UNBLOCK (they return nothing: no token is taken and
then dropped). The dequeue follows the wait (it may span several slots).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as first_of
from typing import Any

import redis
from redis.client import Pipeline
from redis.exceptions import RedisClusterException

from .cluster import open_cluster
from .db import open_client
from .keys import Layout
from .url import RedisOptions

#: The longest single BLPOP; longer waits are made of several.
SLICE = 5.0
#: Shorter waits than this return at once (BLPOP's timeout 0 would mean "forever").
MIN_WAIT = 0.001


class Waiter:
    def __init__(self, options: RedisOptions, layout: Layout) -> None:
        self._options = options
        self._layout = layout
        self._client = open_client(options, blocking=True)
        self._closed = threading.Event()

    def wait(self, queues: Sequence[str], timeout: float) -> None:
        keys = self._keys(queues)
        end = time.monotonic() + timeout
        while keys and not self._closed.is_set():
            left = end - time.monotonic()
            if left < MIN_WAIT:
                return
            if self._client.blpop(keys, timeout=min(left, SLICE)) is not None:
                return

    def wait_then(
        self, queues: Sequence[str], timeout: float, then: Callable[[Pipeline], None]
    ) -> tuple[bool, Any]:
        """One BLPOP of at most ``min(timeout, SLICE)`` with the command ``then`` queues
        pipelined behind it: whether a token woke us, and that command's reply (or the
        exception it raised, for the caller to judge)."""
        pipe = self._client.pipeline(transaction=False)
        pipe.blpop(self._keys(queues), timeout=min(max(timeout, MIN_WAIT), SLICE))
        then(pipe)
        token, reply = pipe.execute(raise_on_error=False)
        if isinstance(token, Exception):
            raise token
        return token is not None, reply

    def _keys(self, queues: Sequence[str]) -> list[str]:
        return [self._layout.queue_key(q, "wake") for q in dict.fromkeys(queues)]

    def close(self) -> None:
        self._closed.set()
        self._client.close()


class _Blocked:
    """One BLPOP under way: the id of its connection, once known, to end it early."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.client_id: int | None = None
        self.known = threading.Event()


class ClusterWaiter:
    """``Waiter.wait`` on a Redis Cluster: one BLPOP per slot of the queues, side by side."""

    def __init__(self, options: RedisOptions, layout: Layout) -> None:
        self._layout = layout
        self._client: Any = open_cluster(options, blocking=True)
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="fairq-wait")
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._blocked: set[_Blocked] = set()

    def wait(self, queues: Sequence[str], timeout: float) -> None:
        groups: dict[int, list[str]] = {}
        for queue in dict.fromkeys(queues):
            groups.setdefault(self._layout.group(queue), []).append(
                self._layout.queue_key(queue, "wake")
            )
        end = time.monotonic() + timeout
        while groups and not self._closed.is_set():
            left = end - time.monotonic()
            if left < MIN_WAIT:
                return
            if self._round(list(groups.values()), min(left, SLICE)):
                return

    def _round(self, groups: list[list[str]], seconds: float) -> bool:
        """BLPOP every group for at most ``seconds``; True if a token (or an error: the slots
        may have moved, the dequeue that follows finds out) ended the wait."""
        blocked = [_Blocked(self._client.get_node_from_key(keys[0])) for keys in groups]
        with self._lock:
            self._blocked.update(blocked)
        futures = [
            self._pool.submit(self._blpop, one, keys, seconds)
            for one, keys in zip(blocked, groups, strict=True)
        ]
        try:
            _, pending = first_of(futures, return_when=FIRST_COMPLETED)
            for one, future in zip(blocked, futures, strict=True):
                if future in pending:
                    self._unblock(one)
            woke = [_woke(future) for future in futures]
            if any(future.exception() is not None for future in futures):
                self._refresh()
            return any(woke)
        finally:
            with self._lock:
                self._blocked.difference_update(blocked)

    def _blpop(self, one: _Blocked, keys: list[str], seconds: float) -> Any:
        """BLPOP on a connection of the node's own, its CLIENT ID sent in the same write."""
        pool = self._client.get_redis_connection(one.node).connection_pool
        connection: Any = pool.get_connection()
        try:
            connection.send_packed_command(
                connection.pack_commands([("CLIENT", "ID"), ("BLPOP", *keys, seconds)])
            )
            one.client_id = int(connection.read_response())
            one.known.set()
            return connection.read_response()
        except BaseException:
            connection.disconnect()
            raise
        finally:
            one.known.set()
            pool.release(connection)

    def _unblock(self, one: _Blocked) -> None:
        one.known.wait()
        if one.client_id is not None:
            try:
                node = self._client.get_redis_connection(one.node)
                node.execute_command("CLIENT", "UNBLOCK", one.client_id)
            except redis.RedisError:
                pass  # its BLPOP ends with its timeout instead

    def _refresh(self) -> None:
        """Learn the slots' owners again (a failover, a slot moved)."""
        # when it fails, the dequeue that follows reports the store unreachable
        with contextlib.suppress(redis.RedisError, RedisClusterException):
            self._client.nodes_manager.initialize()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            blocked = list(self._blocked)
        for one in blocked:
            self._unblock(one)
        self._pool.shutdown(wait=True)
        self._client.close()


def _woke(future: Future[Any]) -> bool:
    """A BLPOP that returned a token, or failed: the slot's master changed (MOVED) or could not
    be reached (``_round`` then learns the slots' owners again)."""
    if future.exception() is not None:
        return True
    return future.result() is not None
