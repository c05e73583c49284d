"""One thread that keeps a set of leases alive: the native worker's, the relayed runs', the
relay's holds and the peers' tenant slots all renew through it.

Every ``every`` seconds (by default a third of the shortest lease it holds, so two renewals
can be missed before a lease lapses) it calls ``renew`` with what it holds. ``renew`` is the
user's own store call and reaction: it returns the tokens the store no longer holds (or None
when the store could not be reached: it logs that, and the next renewal comes at the usual
time). Those still held are dropped and handed to ``lost``.

It sleeps while it holds nothing and is woken only when it must renew sooner: by a first lease,
or one shorter than every lease it holds (a wake-up per job would cost a thread switch for
nothing). It is fork-safe: the first ``hold`` in a process (a prefork pool's child, an RQ work
horse) starts that process's own thread, since none crosses a fork; nor does its lock, which a
child takes afresh (the parent's thread may have held it at the fork).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Collection
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LeaseKeeper(Generic[T]):
    """Renews ``token -> item`` leases from a daemon thread until ``stop``."""

    def __init__(
        self,
        renew: Callable[[dict[str, T]], Collection[str] | None],
        *,
        name: str,
        lost: Callable[[list[T]], None] | None = None,
        every: float | None = None,
    ) -> None:
        self._renew = renew
        self._lost = lost
        self.name = name
        self.every = every
        self._held: dict[str, tuple[T, float]] = {}  # token -> (item, lease seconds)
        self._changed = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._thread_pid: int | None = None  # the process _thread renews for
        self._stopped = False
        me = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forked(me()))

    def __len__(self) -> int:
        with self._changed:
            return len(self._held)

    def hold(self, token: str, item: T, lease: float) -> None:
        """Keep ``token`` (a lease of ``lease`` seconds) until ``drop``, ``take_all`` or lost."""
        with self._changed:
            sooner = all(seconds > lease for _, seconds in self._held.values())
            self._held[token] = (item, lease)
            if self._stopped:
                return
            if self._thread_pid != os.getpid():  # none yet in this process (or the parent's)
                self._thread_pid = os.getpid()
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            elif sooner:
                self._changed.notify_all()

    def drop(self, token: str) -> T | None:
        """Stop renewing ``token`` (its run ended); its item, or None if it was not held."""
        with self._changed:
            held = self._held.pop(token, None)
            return None if held is None else held[0]

    def take_all(self) -> dict[str, T]:
        """Stop renewing everything held; what was held."""
        with self._changed:
            held, self._held = self._held, {}
            return {token: item for token, (item, _) in held.items()}

    def stop(self) -> None:
        """End the thread (after a renewal under way); what is held lapses at its leases."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
            thread = self._thread if self._thread_pid == os.getpid() else None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _serve(self) -> None:
        last = time.monotonic()
        while True:
            with self._changed:
                while not self._stopped and not self._held:
                    self._changed.wait()
                if self._stopped:
                    return
                every = self.every or min(seconds for _, seconds in self._held.values()) / 3
                left = last + every - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                    continue
                held = {token: item for token, (item, _) in self._held.items()}
            last = time.monotonic()
            gone = self._renew(held)
            if not gone:
                continue
            with self._changed:  # one dropped since the snapshot was not lost
                lost = [held[t] for t in gone if t in held and self._held.pop(t, None) is not None]
            if lost and self._lost is not None:
                self._lost(lost)


def _forked(keeper: LeaseKeeper[Any] | None) -> None:
    """In a forked child: a lock of its own, no thread yet (the next ``hold`` starts one)."""
    if keeper is not None:
        keeper._changed = threading.Condition(threading.Lock())
        keeper._thread = None
        keeper._thread_pid = None
