"""Waiting for work without polling: BLPOP on the queues' wake-up lists.

Scripts that make work available (a job becomes ready, a capped tenant gets a slot back)
LPUSH a few tokens to the queue's ``wake`` list and trim it to a bounded length. An idle
worker blocks in BLPOP on the lists of its queues, so it wakes within a round trip of the
change. A token may be stale (the work was taken by a busy worker): the woken worker then
finds nothing and waits again, which costs one dequeue. BLPOP holds its connection, so the
waiter has its own client without a read timeout, and waits in slices so a dead connection
is noticed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

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
        keys = [self._layout.queue_key(q, "wake") for q in dict.fromkeys(queues)]
        end = time.monotonic() + timeout
        while keys and not self._closed.is_set():
            left = end - time.monotonic()
            if left < MIN_WAIT:
                return
            if self._client.blpop(keys, timeout=min(left, SLICE)) is not None:
                return

    def close(self) -> None:
        self._closed.set()
        self._client.close()
