"""The relay's publisher into RQ: a released job becomes an RQ job carrying its ticket."""

from __future__ import annotations

import time
import uuid
from datetime import timezone
from typing import TYPE_CHECKING

import redis
from rq import Queue
from rq.utils import utcparse

from fairq.job import Lease, decode_payload
from fairq.relay import TICKET_KEY, UnknownTask, ticket_of

if TYPE_CHECKING:
    from fairq.integrations.rq.fair import FairRQ


class RQPublisher:
    """Publishes released jobs as RQ jobs (``fairq.relay.Publisher``)."""

    def __init__(self, fair: FairRQ) -> None:
        self.fair = fair
        self._queues: dict[str, Queue] = {}

    def _queue(self, name: str) -> Queue:
        if name not in self._queues:
            self._queues[name] = Queue(
                name, connection=self.fair.connection, serializer=self.fair.serializer
            )
        return self._queues[name]

    def publish(self, lease: Lease) -> None:
        task = self.fair.tasks.get(lease.name)
        if task is None:
            raise UnknownTask(
                f"no fair RQ task named {lease.name!r} in this relay's source ({self.fair!r}); "
                "it was renamed or removed, or its module is not imported by the module the "
                "relay loads"
            )
        args, kwargs = decode_payload(lease.payload)
        self._queue(lease.queue).enqueue_call(
            func=lease.name,
            args=args,
            kwargs=kwargs,
            job_id=f"{lease.job_id}-{uuid.uuid4().hex[:12]}",
            meta={TICKET_KEY: ticket_of(lease)},
            timeout=task.job_timeout,
            result_ttl=task.result_ttl,
            failure_ttl=task.failure_ttl,
        )

    def backlog_size(self, queue: str) -> int | None:
        """Jobs waiting in RQ's ``queue``; None when the broker is down."""
        try:
            return int(self.fair.connection.llen(self._queue(queue).key))
        except redis.RedisError:
            return None

    def backlog_age(self, queue: str) -> float | None:
        """Seconds the oldest job waiting in RQ's ``queue`` has waited (0.0: none waits);
        None when RQ cannot tell (the broker is down, the job vanished meanwhile)."""
        rq_queue = self._queue(queue)
        try:
            first = self.fair.connection.lindex(rq_queue.key, 0)
            if first is None:
                return 0.0
            job_id = first.decode() if isinstance(first, bytes) else str(first)
            stamp = self.fair.connection.hget(rq_queue.job_class.key_for(job_id), "enqueued_at")
        except redis.RedisError:
            return None
        if not stamp:
            return None
        enqueued = utcparse(stamp.decode() if isinstance(stamp, bytes) else str(stamp))
        if enqueued.tzinfo is None:  # RQ before 2.x wrote naive UTC
            enqueued = enqueued.replace(tzinfo=timezone.utc)
        return max(0.0, time.time() - enqueued.timestamp())
