"""Tenant slots for plain Celery tasks (no relay): a job runs only while its tenant holds one of
its slots in the queue; otherwise it waits in the tenant's line in the store and is sent again
when a slot frees (and, as a fallback, a little later), without spending a retry.

::

    @celery_app.task(base=fair.SlotTask, fair_tenant="account_id", fair_slots=2)
    def render(account_id, report): ...

``fair_slots``: at most this many jobs of one tenant run at once in the queue (None: the
tenant's ``max_running`` as the store has it, changed at run time with ``fairq tenants``).
A slot is leased (``fair_lease``) and renewed by a thread of the worker process while the job
runs, released when it ends or raises; a killed worker's slot frees when its lease ends.
The worker that releases a slot sends the oldest job waiting for it at once (``wake``), with
the same task id, so a ``revoke`` still reaches it (fairq/integrations/slots.py: parking).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from celery import Task
from celery.exceptions import Ignore, Reject

from fairq.contract import SlotResult, Woken
from fairq.errors import MissingTenant
from fairq.integrations.celery.calls import home_queue, tenant_of_call
from fairq.integrations.slots import fallback, turn
from fairq.policy.bounds import check_tenant, seconds
from fairq.worker.joblog import describe

if TYPE_CHECKING:
    import celery

    from fairq.integrations.celery import FairCelery

log = logging.getLogger("fairq.integrations.celery")

#: The message header counting how often a job was deferred (its back-off grows with it).
DEFERRED_KEY = "fairq_deferred"
#: Headers of a job's copies: its place in the tenant's line, and whether a release woke it.
WAITER_KEY = "fairq_waiter"
WOKEN_KEY = "fairq_woken"
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
        waiter = getattr(request, WAITER_KEY, None)
        woken = bool(getattr(request, WOKEN_KEY, False))
        park = self._park_text(args, kwargs, queue)
        slot = self.fair.slots.acquire(
            queue, tenant, holder, lease, self.fair_slots, waiter=waiter, park=park
        )
        verdict = turn(slot, woken)
        if verdict == "drop":
            log.info(
                "job %s %s of tenant %r: copy dropped (%s)",
                request.id,
                self.name,
                tenant,
                "another copy ran" if slot.gone else "no free slot; back in line",
                extra={"action": "slot_copy_dropped", "job_id": request.id, "queue": queue},
            )
            raise Ignore()
        if verdict == "defer":
            self._defer(args, kwargs, queue, tenant, slot, waiter)
        if woken:
            log.info(
                "job %s %s of tenant %r started: woken by a freed slot",
                request.id,
                self.name,
                tenant,
            )
        try:
            return super().__call__(*args, **kwargs)
        finally:
            self.fair.slots.release(slot.token)

    def _park_text(self, args: tuple[Any, ...], kwargs: dict[str, Any], queue: str) -> str | None:
        """What ``wake`` needs to send this job again (JSON); None when its arguments are not
        JSON (the job then waits for its timed copy only)."""
        request = self.request
        job = {
            "task": self.name,
            "args": list(args),
            "kwargs": kwargs,
            "id": request.id,
            "queue": queue,
            "retries": request.retries,
            "deferred": int(getattr(request, DEFERRED_KEY, 0) or 0),
        }
        try:
            return json.dumps(job, separators=(",", ":"))
        except (TypeError, ValueError):
            return None

    def _defer(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        queue: str,
        tenant: str,
        slot: SlotResult,
        carried: str | None,
    ) -> NoReturn:
        """Send the timed copy of the job (same id, same retries count; due as ``fallback``
        says) and drop this message (``carried``: the place this message carried)."""
        request = self.request
        deferred = int(getattr(request, DEFERRED_KEY, 0) or 0)
        delay = fallback(slot, deferred, time.time(), DEFER_FIRST, DEFER_MOST)
        try:
            self.apply_async(
                args,
                kwargs,
                task_id=request.id,
                queue=queue,
                countdown=delay,
                headers={DEFERRED_KEY: deferred + 1, WAITER_KEY: slot.waiter},
                retries=request.retries,
            )
        except Exception as exc:  # keep this message: the broker gives it back (acks_late)
            if not self.fair.slots.leave(queue, tenant, slot.waiter, carried):
                log.info(
                    "job %s %s of tenant %r: the broker did not take its timed copy (%s), but a "
                    "woken copy runs it; this one is dropped",
                    request.id,
                    self.name,
                    tenant,
                    describe(exc),
                )
                raise Ignore() from exc
            log.warning(
                "job %s %s of tenant %r requeued: no free slot in %r and the broker did not take "
                "its timed copy (%s)",
                request.id,
                self.name,
                tenant,
                queue,
                describe(exc),
            )
            raise Reject(
                f"tenant {tenant!r} has no free slot in {queue!r} and the broker did not take "
                f"the job back ({describe(exc)}); requeued",
                requeue=True,
            ) from exc
        log.info(
            "job %s %s of tenant %r deferred: no free slot in queue %r; waits in line, timed "
            "copy in %.2f s (deferral %d)",
            request.id,
            self.name,
            tenant,
            queue,
            delay,
            deferred + 1,
            extra={"action": "slot_deferred", "job_id": request.id, "queue": queue},
        )
        raise Ignore()


def wake(celery_app: celery.Celery, woken: Woken) -> None:
    """Send a job a release woke (its park text), marked so its guard knows it (SlotKeeper)."""
    job = json.loads(woken.park)
    celery_app.send_task(
        job["task"],
        args=job["args"],
        kwargs=job["kwargs"],
        task_id=job["id"],
        queue=job["queue"],
        retries=job["retries"],
        headers={DEFERRED_KEY: job["deferred"], WAITER_KEY: woken.place, WOKEN_KEY: True},
    )
