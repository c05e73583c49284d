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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from redis.client import Pipeline

from .connection import RedisOptions, open_client
from .keys import Layout

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
