"""Tenant slots for plain Celery tasks (no relay): a job runs only while its tenant holds one of
its slots in the queue; otherwise it is sent again for a little later, without spending a retry.

::

    @celery_app.task(base=fair.SlotTask, fair_tenant="account_id", fair_slots=2)
    def render(account_id, report): ...

``fair_slots``: at most this many jobs of one tenant run at once in the queue (None: the
tenant's ``max_running`` as the store has it, changed at run time with ``fairq tenants``).
A slot is leased (``fair_lease``) and renewed by a thread of the worker process while the job
runs, released when it ends or raises; a killed worker's slot frees when its lease ends.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from celery import Task
from celery.exceptions import Ignore, Reject

from fairq.contract import SlotResult
from fairq.errors import MissingTenant
from fairq.integrations.celery.calls import home_queue, tenant_of_call
from fairq.policy.bounds import check_tenant, seconds
from fairq.worker.joblog import describe

if TYPE_CHECKING:
    from fairq.integrations.celery import FairCelery

log = logging.getLogger("fairq.integrations.celery")

#: The message header counting how often a job was deferred (its back-off grows with it).
DEFERRED_KEY = "fairq_deferred"
DEFER_FIRST = 0.25
DEFER_MOST = 10.0


class SlotTask(Task):  # type: ignore[misc]  # Celery ships no type hints
    """The behaviour of ``FairCelery(...).SlotTask``: run only while holding a tenant slot.

    Task options: ``fair_tenant`` (required: the argument holding the tenant, or a callable),
    ``fair_slots`` (the cap; None: the tenant's ``max_running`` in the store), ``fair_queue``
    (the queue slots count in; default: the queue the message came from), ``fair_lease``.
    """

    fair: ClassVar[FairCelery]
    fair_tenant: ClassVar[str | Callable[..., object] | None] = None
    fair_queue: ClassVar[str | None] = None
    fair_slots: ClassVar[int | None] = None
    fair_lease: ClassVar[float | timedelta] = 60.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        if request.called_directly or request.is_eager:
            return super().__call__(*args, **kwargs)
        found = tenant_of_call(self, args, kwargs)
        if found is None or found == "":
            raise MissingTenant(
                f"task {self.name!r} runs under tenant slots but this call has no tenant: "
                "declare the argument that holds it (fair_tenant='account_id')"
            )
        tenant = check_tenant(found)
        delivery = request.delivery_info or {}
        queue = self.fair_queue or delivery.get("routing_key") or home_queue(self, self.app)
        holder = f"{request.hostname or socket.gethostname()}:{os.getpid()}"
        lease = seconds("fair_lease", self.fair_lease)
        slot = self.fair.slots.acquire(queue, tenant, holder, lease, self.fair_slots)
        if slot.token is None:
            self._defer(args, kwargs, queue, tenant, slot)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            self.fair.slots.release(slot.token)

    def _defer(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        queue: str,
        tenant: str,
        slot: SlotResult,
    ) -> NoReturn:
        """Send the job again for later (same id, same retries count) and drop this message:
        backing off 0.25 s doubling to 10 s per deferral, never past the earliest slot's end."""
        request = self.request
        deferred = int(getattr(request, DEFERRED_KEY, 0) or 0)
        nominal = min(DEFER_MOST, DEFER_FIRST * 2.0 ** min(deferred, 16))
        delay = nominal / 2 + random.random() * nominal / 2
        if slot.free_at is not None:
            delay = min(delay, max(slot.free_at - time.time(), DEFER_FIRST))
        try:
            self.apply_async(
                args,
                kwargs,
                task_id=request.id,
                queue=queue,
                countdown=delay,
                headers={DEFERRED_KEY: deferred + 1},
                retries=request.retries,
            )
        except Exception as exc:  # keep this message: the broker gives it back (acks_late)
            raise Reject(
                f"tenant {tenant!r} has no free slot in {queue!r} and the broker did not take "
                f"the job back ({describe(exc)}); requeued",
                requeue=True,
            ) from exc
        log.info(
            "job %s %s of tenant %r deferred %.2f s: no free slot in queue %r (deferral %d)",
            request.id,
            self.name,
            tenant,
            delay,
            queue,
            deferred + 1,
            extra={"action": "slot_deferred", "job_id": request.id, "queue": queue},
        )
        raise Ignore()
