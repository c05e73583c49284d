"""What every operation of the Redis store shares: the client, error translation, the time
argument, key blocks (their keys checked once), calls sent once, calls split per slot, the
queues registry and the enqueue order's floor.

A call's keys must lie in one Cluster slot, so an operation over several queues is one call per
``Layout.group``: on a single Redis every queue is in one group (one call, as always), on a
Cluster a group is a slot. ``runs`` keeps the order of the queues where it matters.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from redis.exceptions import RedisClusterException

from fairq.backends.clock import Clock
from fairq.backends.steps import drive

from . import cluster
from .checks import types_checked
from .db import open_client, translated
from .keys import Layout
from .records import num
from .scripts import Arg, library
from .steps import Batch, Blocking, FCall, RedisSteps, Request, once_args, run_batch
from .url import RedisOptions

T = TypeVar("T")

#: A function call: function, the queue whose slot keeps its reply (None: not sent once, see
#: ``Store.once``), keys, args.
Call = tuple[str, str | None, list[str], list[Arg]]
#: How long a queue stays registered by this process before it is registered again (a
#: Cluster's registry is on one master, whose failover may lose a registration).
REGISTER_AGAIN = 60.0


def runs(layout: Layout, queues: Sequence[str]) -> list[list[str]]:
    """``queues`` (each once, first place kept) cut into runs of consecutive queues of one
    group: calls in run order do what one call over every queue did, where order matters."""
    found: list[list[str]] = []
    last = None
    for queue in dict.fromkeys(queues):
        group = layout.group(queue)
        if found and group == last:
            found[-1].append(queue)
        else:
            found.append([queue])
        last = group
    return found


def grouped(layout: Layout, queues: Iterable[str]) -> dict[int, list[str]]:
    """Each group's queues (each once), groups in the order of their first queue."""
    found: dict[int, list[str]] = {}
    for queue in dict.fromkeys(queues):
        found.setdefault(layout.group(queue), []).append(queue)
    return found


class Store:
    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self.layout = Layout(options.prefix, options.cluster)
        self.client: Any = (
            cluster.open_cluster(options) if options.cluster else open_client(options)
        )  # replies are parsed where they are used
        self.library = library()
        self._checked: set[str] = set()
        self._registered: dict[str, float] = {}
        self.caller = os.urandom(6).hex()  # with the thread's id: whose reply key (once)
        self._lock = threading.Lock()
        self._seq = 0
        #: Per queue, a time before which nothing in it falls due (no scheduled job, lease or
        #: rate hold ends), as the last dequeue.lua reply said; -inf or absent: unknown. A call
        #: that may add something due forgets it (``keys``). On a Cluster a dequeue whose jobs
        #: came from earlier slots skips maintaining a later one with nothing due (consuming.py).
        self.due: dict[str, float] = {}

    @contextmanager
    def translated(self) -> Iterator[None]:
        try:
            with translated(self.options.safe_url):
                yield
        except RedisClusterException as exc:
            raise cluster.translated(self.options.safe_url, exc) from exc

    def at(self, now: float) -> str:
        """A call's ``now`` argument: '>' .. now with clock=store, for max(now, the server's
        clock when the function runs: ``now_of`` in _lib.lua); now itself with clock=caller."""
        if self.options.clock is Clock.STORE:
            return ">" + num(now)
        return num(now)

    def seq_floor(self, count: int) -> int:
        """The enqueue order's floor for ``count`` jobs (enqueue.lua): microseconds of the
        wall clock, never below what this store object handed out before, so one producer's
        jobs are ordered as it enqueued them in every queue."""
        with self._lock:
            floor = max(self._seq + 1, time.time_ns() // 1000)
            self._seq = floor + count - 1
        return floor

    # -- calls ----------------------------------------------------------------------------

    def perform(self, request: Request) -> Any:
        """Perform one request of an operation (fairq.backends.steps) with the blocking client."""
        if isinstance(request, Blocking):
            return request.run()
        if isinstance(request, Batch):
            with self.translated():
                return run_batch(self.client, request)
        if request.once is not None:
            return self.run_once(request.op, request.once, request.keys, request.args)
        return self.run(request.op, request.keys, request.args)

    def drive(self, steps: RedisSteps[T]) -> T:
        return drive(steps, self.perform)

    def run(self, name: str, keys: list[str], args: Sequence[Arg]) -> Any:
        with self.translated():
            return self.library(self.client, name, keys, args)

    def run_once(self, name: str, queue: str, keys: list[str], args: Sequence[Arg]) -> Any:
        """Run a function registered with ``register_once`` (_lib.lua): when redis-py sends
        the call again after its connection failed, the re-sending gets the first sending's
        reply and changes nothing. ``queue``: one of the call's, whose slot keeps the reply.
        """
        return self.run(name, *self.once(queue, keys, args))

    def once(self, queue: str, keys: list[str], args: Sequence[Arg]) -> tuple[list[str], list[Arg]]:
        """``keys`` and ``args`` with this thread's reply key in ``queue``'s slot (one per
        thread and queue, so concurrent calls keep their own) and a new call id."""
        caller = f"{self.caller}-{threading.get_ident()}"
        call = FCall("", keys, list(args))
        return once_args(self.layout, queue, caller, os.urandom(8).hex(), call)

    def run_all(self, calls: Sequence[Call], *, replicated: bool = False) -> list[Any]:
        """Run independent calls (of different slots, on a Cluster) in one pipeline (one per
        master, ``per_master``, on a Cluster); each call's reply, in order. A single call is
        sent as it is. ``replicated``: each master's calls followed by WAIT (``replicated``).
        A call not sent once (maintain) may run twice when its master fails: run again at the
        same ``now`` it changes nothing more."""
        sent = [self._sent(call) for call in calls]
        if replicated:
            return self.replicated([self._fcall(*one) for one in sent])
        if len(sent) == 1:
            return [self.run(*sent[0])]
        if self.layout.cluster:  # calls of several masters: redis-py's cluster pipeline costs more
            return self.per_master([self._fcall(*one) for one in sent])
        with self.translated():
            pipe = self.client.pipeline(transaction=False)
            for name, keys, args in sent:
                self.library.pipe(pipe, name, keys, args)
            replies = pipe.execute(raise_on_error=False)
            return [
                self.library.answer(self.client, reply, name, keys, args)
                for reply, (name, keys, args) in zip(replies, sent, strict=True)
            ]

    def replicated(self, sends: Sequence[cluster.Send]) -> list[Any]:
        """Commands safe to send again, each master's followed by WAIT for
        ``?wait_replicas=n`` replicas (cluster.per_master); their replies."""
        return self.per_master(sends, (self.options.wait_replicas, self.options.wait_timeout))

    def per_master(
        self, sends: Sequence[cluster.Send], wait: tuple[int, float] | None = None
    ) -> list[Any]:
        """Commands safe to send again, in one pipeline per master (cluster.per_master)."""
        with self.translated():
            return cluster.per_master(self.client, self.library, sends, wait)

    def _fcall(self, name: str, keys: list[str], args: list[Arg]) -> cluster.Send:
        return keys[0], self.library.command(name, keys, args)

    def _sent(self, call: Call) -> tuple[str, list[str], list[Arg]]:
        name, queue, keys, args = call
        if queue is None:
            return name, keys, args
        keys, sent = self.once(queue, keys, args)
        return name, keys, sent

    # -- keys -----------------------------------------------------------------------------

    def keys(self, blocks: dict[str, int], now: float, *, lowers: bool = True) -> list[str]:
        return self.drive(self.keys_steps(blocks, now, lowers=lowers))

    def keys_steps(
        self, blocks: dict[str, int], now: float, *, lowers: bool = True
    ) -> RedisSteps[list[str]]:
        """The key blocks of ``blocks`` (queue -> block number), in block order, each ending
        with the queue's figures key of the slot of ``now`` (``Layout.block``). ``lowers``:
        the call may make something fall due sooner (``due``): all but acks, heartbeats,
        checkpoints, requeues and tenant slots, which only end or extend what is pending."""
        keys: list[str] = []
        for queue in sorted(blocks, key=blocks.__getitem__):
            if lowers:
                self.due.pop(queue, None)
            if queue not in self._checked:
                types = self.layout.queue_types(queue)
                yield from types_checked(self.options.safe_url, types, self.layout, queue)
                self._checked.add(queue)
            keys += self.layout.block(queue, now)
        return keys

    def register(self, queues: Iterable[str]) -> None:
        """Add queues to the registry of queues seen (reads across queues look there), once
        per REGISTER_AGAIN seconds per queue and process. On a single Redis the scripts that
        store into a queue add it themselves; a Cluster's scripts cannot reach the registry."""
        now = time.monotonic()
        with self._lock:
            last = self._registered
            new = [q for q in dict.fromkeys(queues) if now - last.get(q, -1e9) > REGISTER_AGAIN]
        if not new:
            return
        with self.translated():
            self.client.sadd(self.layout.queues, *new)
        with self._lock:
            self._registered.update(dict.fromkeys(new, now))
