"""``wait``: block on LISTEN until a queue gets work, instead of polling the tables.

Enqueue (and every event that makes a job ready or frees a capped tenant's slot) sends
``pg_notify`` on the queue's channel inside its transaction, so the notification arrives when
the change is visible. One dedicated connection per backend listens. A channel starts being
listened to on the first wait for its queue; a notification sent just before that would be
missed, so that first wait returns at once and the caller looks again. Notifications that
arrive between waits are kept by the connection and end the next wait at once: a wake-up is
never lost, at worst one is spurious.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence

import psycopg
from psycopg import Connection

from fairq.backends.postgres.db import connect
from fairq.backends.postgres.records import Row
from fairq.backends.postgres.url import PostgresUrl
from fairq.errors import StoreUnavailable

log = logging.getLogger("fairq.backends.postgres")


class Waiter:
    def __init__(self, url: PostgresUrl, channel: Callable[[str], str], wake_channel: str) -> None:
        self.url = url
        self.channel = channel
        self.wake_channel = wake_channel  # close() notifies here to end a wait early
        self._conn: Connection[Row] | None = None
        self._listening: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False

    def wait(self, queues: Sequence[str], timeout: float) -> None:
        if timeout <= 0 or self._closed:
            return
        with self._lock:
            try:
                self._wait(queues, timeout)
            except (psycopg.OperationalError, StoreUnavailable) as exc:
                log.warning("LISTEN connection lost (%s); will reconnect", exc)
                self._drop()
                time.sleep(min(timeout, 0.5))

    def _wait(self, queues: Sequence[str], timeout: float) -> None:
        conn = self._connection()
        wanted = {self.channel(queue) for queue in queues} | {self.wake_channel}
        new = sorted(wanted - self._listening)
        for channel in new:
            conn.execute(f'LISTEN "{channel}"')  # channels are hex digests: nothing to escape
            self._listening.add(channel)
        if any(channel != self.wake_channel for channel in new):
            return
        for _ in conn.notifies(timeout=timeout, stop_after=1):
            pass

    def _connection(self) -> Connection[Row]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = connect(self.url)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None
        self._listening.clear()

    def close(self, wake: Callable[[str], None]) -> None:
        """Stop: end a wait in progress (by notifying it), then close the connection."""
        self._closed = True
        if self._lock.locked():
            with contextlib.suppress(psycopg.Error, StoreUnavailable):
                wake(self.wake_channel)
        with self._lock:
            self._drop()
