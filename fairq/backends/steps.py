"""Store operations written once, run by a blocking or an asyncio transport (sans-I/O).

An operation that needs the store is a generator: it builds each request (a statement, a Lua
call, a pipeline of reads), ``yield``s it, and reads the reply it is sent back; what it
``return``s is the operation's result. It does no I/O itself. ``drive`` runs it on a blocking
transport (a psycopg ``Cursor``, a redis-py client), ``adrive`` on an asyncio one (an
``AsyncCursor``, a ``redis.asyncio`` client): the two differ only in ``await``, so the rules,
the request building and the reply reading exist once. An error of the transport is thrown
into the generator at the ``yield`` that asked, so an operation may handle it like a raised one.

The pattern is that of the sans-I/O protocol libraries (h11, wsproto), at the level of one
store call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

Req = TypeVar("Req")
T = TypeVar("T")

#: An operation: yields requests of type ``Req``, is sent each one's reply, returns ``T``.
Steps = Generator[Req, Any, T]


def drive(steps: Steps[Req, T], perform: Callable[[Req], Any]) -> T:
    """Run ``steps`` to its result, each request performed by ``perform`` (blocking)."""
    try:
        request = next(steps)
        while True:
            try:
                reply = perform(request)
            except BaseException as exc:  # cancellation too: the operation sees what ended it
                request = steps.throw(exc)
            else:
                request = steps.send(reply)
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        steps.close()


async def adrive(steps: Steps[Req, T], perform: Callable[[Req], Awaitable[Any]]) -> T:
    """Run ``steps`` to its result, each request awaited through ``perform``."""
    try:
        request = next(steps)
        while True:
            try:
                reply = await perform(request)
            except BaseException as exc:  # cancellation too: the operation sees what ended it
                request = steps.throw(exc)
            else:
                request = steps.send(reply)
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        steps.close()
