"""The RabbitMQ server the Celery and Dramatiq tests use as a broker: ``$FAIRQ_TEST_AMQP_URL``
(default the local server's ``/`` vhost). Tests share it, so each uses queues of its own
(a unique name) and deletes them after; nothing else on the server is touched. A server that
does not answer fails the tests, never skips them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from kombu import Connection

AMQP_URL = os.environ.get("FAIRQ_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


def connect() -> Connection:
    """A connection to the test server; fails naming the URL when it does not answer."""
    connection = Connection(AMQP_URL, connect_timeout=10)
    try:
        connection.connect()
    except Exception as exc:
        raise AssertionError(
            f"RabbitMQ at {AMQP_URL} does not answer ({exc}); start it (rabbitmq-server "
            "-detached) or set FAIRQ_TEST_AMQP_URL"
        ) from exc
    return connection


def waiting(queue: str) -> int:
    """Messages ready in ``queue`` (a passive declare; 0 when there is no such queue)."""
    with connect() as connection:
        channel = connection.channel()
        try:
            return int(channel.queue_declare(queue=queue, passive=True).message_count)
        except Exception as exc:
            if "NOT_FOUND" in str(exc):
                return 0
            raise


def declare(queue: str, **arguments: object) -> None:
    """Make ``queue`` durable with ``arguments`` (as another client would have, first)."""
    with connect() as connection:
        connection.channel().queue_declare(
            queue=queue, durable=True, auto_delete=False, arguments=arguments
        )


def drop(queues: Iterable[str]) -> None:
    """Delete the queues (and the exchanges of the same name Celery declares), if present."""
    with connect() as connection:
        for name in queues:
            for delete in ("queue_delete", "exchange_delete"):
                channel = connection.channel()
                try:
                    getattr(channel, delete)(name)
                except Exception:  # not there (the broker closed the channel): nothing to drop
                    continue
                channel.close()


def via(port: int) -> str:
    """The test server's URL through a local port (a broker_proxy.Proxy in front of it)."""
    parts = urlsplit(AMQP_URL)
    user = parts.netloc.rpartition("@")[0]
    return urlunsplit(
        parts._replace(netloc=f"{user}@127.0.0.1:{port}" if user else f"127.0.0.1:{port}")
    )


def address() -> tuple[str, int]:
    parts = urlsplit(AMQP_URL)
    return parts.hostname or "127.0.0.1", parts.port or 5672
