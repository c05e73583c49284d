"""The relay's publisher into Celery: a released job becomes an ordinary Celery message with the
ticket in its headers, sent with Celery's own API, so any broker Celery supports takes it.

The broker's backlog of a queue is read with a passive ``queue.declare`` (kombu answers it for
every transport: RabbitMQ returns the queue's ready messages, Redis the list's length), so
``--max-backlog`` works on both. A message's age is not known: Celery's messages carry no sent
time, and AMQP cannot look at a queue's head without taking it (RabbitMQ's management plugin
could tell, from the AMQP ``timestamp`` Celery does not set).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from fairq.errors import ConfigError
from fairq.integrations.brokers import refusal
from fairq.job import Lease, decode_payload
from fairq.relay import TICKET_KEY, UnknownTask, ticket_of
from fairq.urls import redact_url

if TYPE_CHECKING:
    from fairq.integrations.celery import FairCelery

#: The library behind each of kombu's transports that needs one, and the pip extra that has it.
EXTRAS = {"redis": "celery[redis]", "librabbitmq": "celery[librabbitmq]", "botocore": "celery[sqs]"}


class CeleryPublisher:
    """Sends released jobs to the broker as Celery messages (``fairq.relay.Publisher``)."""

    def __init__(self, fair: FairCelery) -> None:
        self.fair = fair
        self.url = str(fair.celery.conf.broker_write_url or fair.celery.conf.broker_url or "")
        self._check_transport()

    def publish(self, lease: Lease) -> None:
        task = self.fair.celery.tasks.get(lease.name)
        if task is None:
            raise UnknownTask(
                f"no Celery task named {lease.name!r} in app {self.fair.celery.main!r} (renamed, "
                "removed, or its module not imported by the relay)"
            )
        if not isinstance(task, self.fair.Task):
            raise UnknownTask(
                f"Celery task {lease.name!r} is not a fair task (declare it with "
                "base=fair.Task): its worker would run it without reporting its end"
            )
        args, kwargs = decode_payload(lease.payload)
        try:
            inspect.signature(task.run).bind(*args, **kwargs)
        except TypeError as exc:
            raise UnknownTask(
                f"Celery task {lease.name!r} no longer takes these arguments: {exc}"
            ) from None
        try:
            task.apply_async(
                args,
                kwargs,
                task_id=lease.job_id,
                queue=lease.queue,
                headers={TICKET_KEY: ticket_of(lease)},
                retries=lease.attempt - 1,
            )
        except Exception as exc:
            raise refusal(exc, "Celery", self.url, lease.queue) from exc

    def backlog_age(self, queue: str) -> float | None:
        return None  # Celery messages carry no sent time the relay could read cheaply

    def backlog_size(self, queue: str) -> int | None:
        """Messages of ``queue`` waiting in the broker (0: no such queue yet); None when the
        broker does not answer."""
        try:
            with self.fair.celery.pool.acquire(block=True) as connection:
                channel = connection.channel()
                try:
                    return int(_waiting(channel, queue))
                finally:
                    _close(channel)
        except Exception:
            return None

    def _check_transport(self) -> None:
        """Fail now, in one line, on a broker URL kombu has no transport for or whose library
        is missing (else each publish would fail the same way)."""
        try:
            connection = self.fair.celery.connection_for_write()
            try:
                connection.transport  # noqa: B018  # resolves the transport and imports its library
            finally:
                connection.release()
        except KeyError as exc:
            raise ConfigError(
                f"Celery cannot use broker URL {redact_url(self.url)} ({exc.args[0]}): RabbitMQ "
                "is amqp://USER:PASSWORD@HOST:5672/VHOST, Redis redis://HOST:6379/DB"
            ) from None
        except ImportError as exc:
            missing = exc.name
            if missing is None:  # kombu's own message names the package (redis, …)
                raise ConfigError(f"Celery's broker {redact_url(self.url)}: {exc}") from None
            extra = EXTRAS.get(missing, missing)
            raise ConfigError(
                f"Celery's broker {redact_url(self.url)} needs {missing!r}, which is not "
                f"installed: pip install '{extra}'"
            ) from None


def _waiting(channel: Any, queue: str) -> int:
    try:
        return int(channel.queue_declare(queue=queue, passive=True).message_count)
    except Exception as exc:
        if "NOT_FOUND" in str(exc) or getattr(exc, "code", None) in (404, "404"):
            return 0  # not declared yet: nothing waits in it
        raise


def _close(channel: Any) -> None:
    try:
        channel.close()
    except Exception:  # a channel the broker closed (a 404): nothing to close
        return
