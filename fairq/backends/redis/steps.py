"""What a Redis operation asks of the server (fairq.backends.steps): a call of one of the
library's functions, a pipeline of plain commands, or (on a Redis Cluster) blocking work.
``RedisBackend`` performs them with
redis-py's blocking client, ``AsyncRedisStore`` (aio.py) with ``redis.asyncio``'s; both queue
a pipeline's commands the same way (queueing does not wait, only ``execute`` does), so one
``fill`` function serves both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fairq.backends.steps import Steps, drive

from .keys import Layout
from .scripts import Arg

T = TypeVar("T")


@dataclass(frozen=True)
class FCall:
    """A call of the library's function ``op``. ``once``: the queue in whose Cluster slot the
    reply is kept so that a re-sending changes nothing (``register_once`` in _lib.lua); None
    for a function registered with ``register``."""

    op: str
    keys: list[str]
    args: list[Arg]
    once: str | None = None


@dataclass(frozen=True)
class Batch:
    """Plain commands, queued on one pipeline by ``fill``; the reply is the list of their
    replies, in order. ``transaction``: wrapped in MULTI/EXEC, so they see one moment."""

    fill: Callable[[Any], object]
    transaction: bool = False


@dataclass(frozen=True)
class Blocking:
    """Work only the blocking client does: a Redis Cluster's steps across slots (the ids'
    claims, calls split per slot, pipelined per master: plumbing.py, directory.py). The reply
    is what ``run`` returns. An asyncio store never meets one: on a Cluster the async API
    offloads the blocking store's calls to a thread (fairq/backends/aio.py)."""

    run: Callable[[], Any]


Request = FCall | Batch | Blocking
#: A Redis operation: yields ``Request``s, returns ``T``.
RedisSteps = Steps[Request, T]


def once_args(
    layout: Layout, queue: str, caller: str, call_id: str, call: FCall
) -> tuple[list[str], list[Arg]]:
    """A ``register_once`` call's keys and args: ``caller``'s reply key in ``queue``'s slot and
    the call's id appended. A caller id must be used by one call at a time: concurrent calls
    sharing one would overwrite each other's kept reply."""
    return [*call.keys, layout.reply_key(queue, caller)], [*call.args, call_id]


def run_batch(client: Any, batch: Batch) -> list[Any]:
    """Perform a ``Batch`` with a blocking client."""
    pipe = client.pipeline(transaction=batch.transaction)
    batch.fill(pipe)
    found: list[Any] = pipe.execute()
    return found


def read(client: Any, steps: RedisSteps[T]) -> T:
    """Run a read (Batches only) with a blocking client."""

    def perform(request: Request) -> Any:
        assert isinstance(request, Batch), "reads send no function calls"
        return run_batch(client, request)

    return drive(steps, perform)
