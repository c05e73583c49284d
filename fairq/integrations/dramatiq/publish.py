"""The relay's publisher into Dramatiq: a released job becomes a message to its actor's queue
with the ticket as a message option, enqueued on the app's own broker (Redis or RabbitMQ).

What the broker tells of a queue's backlog:

* RabbitMQ: how many messages wait (a passive ``queue.declare``: the queue's ready messages),
  not their age: AMQP cannot look at a queue's head without taking it, and RabbitMQ's
  management plugin tells a head message's age only from an AMQP ``timestamp`` Dramatiq does
  not set.
* Redis: how many wait (the queue's list) and the oldest one's age (its ``message_timestamp``).
"""

from __future__ import annotations

import json
import time
from typing import Any

import dramatiq
from dramatiq.broker import Broker
from dramatiq.brokers.redis import RedisBroker

from fairq.integrations.brokers import refusal
from fairq.job import Lease, decode_payload
from fairq.relay import TICKET_KEY, UnknownTask, ticket_of


class DramatiqPublisher:
    """Publishes released jobs to their actor's queue (``fairq.relay.Publisher``)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.url = _shown_url(broker)

    def publish(self, lease: Lease) -> None:
        found = self.broker.actors.get(lease.name)
        if found is None:
            known = ", ".join(sorted(self.broker.actors)) or "(none)"
            raise UnknownTask(
                f"no Dramatiq actor named {lease.name!r} is declared on the relay's broker "
                f"(known: {known}); import the module that declares it from the relay's SOURCE"
            )
        args, kwargs = decode_payload(lease.payload)
        message: dramatiq.Message[Any] = dramatiq.Message(
            queue_name=found.queue_name,
            actor_name=lease.name,
            args=tuple(args),
            kwargs=kwargs,
            options={TICKET_KEY: ticket_of(lease)},
            message_id=lease.job_id,
        )
        try:
            self.broker.enqueue(message)
        except Exception as exc:
            raise refusal(exc, "Dramatiq", self.url, found.queue_name) from exc

    def backlog_size(self, queue: str) -> int | None:
        """Messages waiting in ``queue`` (0: no such queue yet); None when the broker does not
        answer or cannot tell."""
        try:
            if _is_rabbitmq(self.broker):
                return self._rabbitmq_waiting(queue)
            if isinstance(self.broker, RedisBroker):
                return int(self.broker.client.llen(f"{self.broker.namespace}:{queue}"))
        except Exception:
            return None
        return None

    def backlog_age(self, queue: str) -> float | None:
        """Seconds the oldest message of ``queue`` has waited (0.0: none waits), on Redis;
        None on RabbitMQ (see the module's docstring) or when the broker does not answer."""
        if not isinstance(self.broker, RedisBroker):
            return None
        client, key = self.broker.client, f"{self.broker.namespace}:{queue}"
        try:
            first = client.lindex(key, 0)
            if first is None:
                return 0.0
            data = client.hget(f"{key}.msgs", first)
            sent = json.loads(data)["message_timestamp"] if data else None
        except Exception:
            return None
        if not isinstance(sent, (int, float)):
            return None
        return max(0.0, time.time() - sent / 1000)

    def _rabbitmq_waiting(self, queue: str) -> int:
        broker: Any = self.broker  # a RabbitmqBroker: its channel is this thread's own
        try:
            declared = broker.channel.queue_declare(queue=queue, passive=True)
        except Exception as exc:
            del broker.channel  # the broker closed it; the next call opens another
            if "NOT_FOUND" in str(exc):
                return 0  # not declared yet: nothing waits in it
            raise
        return int(declared.method.message_count)


def _is_rabbitmq(broker: Broker) -> bool:
    """Dramatiq's RabbitmqBroker (imported only when pika is installed)."""
    try:
        from dramatiq.brokers.rabbitmq import RabbitmqBroker
    except ImportError:
        return False
    return isinstance(broker, RabbitmqBroker)


def _shown_url(broker: Broker) -> str:
    """Where the broker is, as a URL without a password (for the relay's messages)."""
    parameters = getattr(broker, "parameters", None)
    if isinstance(parameters, list):
        parameters = parameters[0] if parameters else None
    if parameters is not None:  # pika's connection parameters
        user = getattr(parameters.credentials, "username", "guest")
        vhost = parameters.virtual_host
        return f"amqp://{user}@{parameters.host}:{parameters.port}/{'' if vhost == '/' else vhost}"
    if isinstance(broker, RedisBroker):
        kwargs = broker.client.connection_pool.connection_kwargs
        where = f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        return f"redis://{where}/{kwargs.get('db', 0)}"
    return type(broker).__name__
