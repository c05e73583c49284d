"""One connection, one lock, short transactions that ride out a locked database.

SQLite lets one writer in at a time per file. Every write takes the write lock up front
(``BEGIN IMMEDIATE``), so a transaction never fails half-way on a lock upgrade; if another
process holds it longer than ``busy_timeout``, the whole transaction is retried with growing,
jittered back-off until ``lock_wait`` seconds have passed. Threads sharing one backend object
take turns on its connection through ``self._lock``.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fairq.errors import StoreUnavailable

T = TypeVar("T")
log = logging.getLogger("fairq.backends.sqlite")

_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED (extended codes are reduced with & 0xFF)


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Is this "someone else holds the lock" (worth retrying) rather than a real failure?"""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Store:
    """A connection to one SQLite file, used by one backend object from any thread."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, lock_wait: float) -> None:
        self.conn = conn
        self.path = path
        self.lock_wait = lock_wait
        self._lock = threading.RLock()
        self._local_changes = 0
        self._changed = threading.Condition(threading.Lock())
        self._closed = False

    # -- transactions ------------------------------------------------------------------------

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one write transaction: all of it happens, or (on error) none.

        Waiters are woken only when rows changed: an empty dequeue must not wake the other
        threads' waits, or idle workers sharing this object would wake each other in a loop.
        """
        with self._lock:
            before = self.conn.total_changes if not self._closed else 0
            result = self._run(work, "BEGIN IMMEDIATE")
            if self.conn.total_changes != before:
                # Counted under the lock, so a version read inside a transaction
                # (``version_within``) holds exactly the commits that came before it.
                with self._changed:
                    self._local_changes += 1
                    self._changed.notify_all()
        return result

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on one consistent snapshot (WAL readers never block the writer)."""
        return self._run(work, "BEGIN")

    def _run(self, work: Callable[[sqlite3.Connection], T], begin: str) -> T:
        with self._lock:
            self._check_open()
            return retry_while_locked(lambda: self._transaction(work, begin), self)

    def _transaction(self, work: Callable[[sqlite3.Connection], T], begin: str) -> T:
        self.conn.execute(begin)
        try:
            result = work(self.conn)
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        return result

    # -- waiting for changes -------------------------------------------------------------------

    def version(self) -> tuple[int, int] | None:
        """Changes so far: (commits by other connections, commits through this object).

        None once closed, which ends any wait.
        """
        with self._lock:
            if self._closed:
                return None
            data_version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        return data_version, self._local_changes

    def version_within(self, db: sqlite3.Connection) -> tuple[int, int]:
        """The version a transaction in progress sees (call it from inside ``write``): a
        wait from it (``wait_for_change(since=…)``) ends on any commit after that transaction,
        including one made between its end and the wait's start."""
        return int(db.execute("PRAGMA data_version").fetchone()[0]), self._local_changes

    def wait_for_change(self, timeout: float, since: tuple[int, int] | None = None) -> None:
        """Return when anyone commits (after ``since``, a version seen earlier; default: now),
        or after ``timeout`` seconds.

        Commits through this object wake us at once (a condition variable); other processes'
        commits are seen by polling ``PRAGMA data_version``, which only changes when another
        connection commits: a few milliseconds at first, backing off to 50 ms, never a hot loop.
        """
        end = time.monotonic() + max(timeout, 0.0)
        start = since or self.version()
        pause = 0.002
        while start is not None and (remaining := end - time.monotonic()) > 0:
            with self._changed:
                if self._local_changes == start[1] and not self._closed:
                    self._changed.wait(min(pause, remaining))
            if self.version() != start:
                return
            pause = min(pause * 2, 0.05)

    # -- life ------------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self.conn.close()
        with self._changed:
            self._changed.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable(f"the SQLite store {self.path} is closed")


def retry_while_locked(attempt: Callable[[], T], store: Store) -> T:
    """Call ``attempt`` until it gets past a busy database, for up to ``store.lock_wait`` s."""
    give_up = time.monotonic() + store.lock_wait
    pause = 0.001
    while True:
        try:
            return attempt()
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
            raise  # a bug in fairq, not the store's state: keep SQLite's own report
        except sqlite3.DatabaseError as exc:
            if not (isinstance(exc, sqlite3.OperationalError) and is_busy(exc)):
                raise StoreUnavailable(f"SQLite store {store.path}: {exc}") from exc
            if time.monotonic() >= give_up:
                raise StoreUnavailable(
                    f"SQLite store {store.path} stayed locked by another connection for more "
                    f"than {store.lock_wait:g} s; is a process stuck inside a transaction?"
                ) from exc
            log.debug("SQLite store %s is locked; retrying in %.3f s", store.path, pause)
            time.sleep(pause * (0.5 + random.random() / 2))
            pause = min(pause * 2, 0.1)
