"""The Celery project the tests run: the example's settings and fair tasks that leave marks.

The test process builds its own copy with ``build(url, broker)``; the worker and relay
processes import this module, which builds one from ``$FAIRQ_URL`` and ``$CELERY_BROKER_URL``.
Task names are explicit: this module has another name in the test process than in the workers.

Each task appends lines to the file ``log`` (one ``write`` each, so lines from several
processes never interleave): ``start TENANT TAG PID`` when it starts, ``end TENANT TAG PID``
when it ends. ``hold``: a file the task waits for before it ends (a gate the test opens).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery

import fairq
from fairq import Throttle
from fairq.integrations.celery import FairCelery

GATE_DEADLINE = 60.0  # a gate never opened fails the task instead of holding a worker forever


@dataclass
class Project:
    celery: Celery
    fair: FairCelery
    record: Any  # a fair task (Celery's tasks are untyped)
    record_brief: Any  # the same with a short lease, for the tests that kill a worker
    paced: Any  # no cost declared; ends a given time after its claim
    fail: Any  # always raises: retried by fairq, then dead
    routed: Any  # a plain task throttled by fair.router (no relay); retries once
    guarded: Any  # a plain task under tenant slots (base=fair.SlotTask, one slot per tenant)
    stoppable: Any  # runs until asked to stop (App.cancel), then stops on the request


def mark(log: str, what: str, tenant: str, tag: str) -> None:
    with open(log, "a") as f:
        f.write(f"{what} {tenant} {tag} {os.getpid()}\n")


def wait_gate(hold: str | None) -> None:
    if hold is None:
        return
    deadline = time.monotonic() + GATE_DEADLINE
    while not Path(hold).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the test never opened {hold}")
        time.sleep(0.01)


def build(url: str, broker: str, queue: str = "fq-default") -> Project:
    """The project on store ``url`` and ``broker``; ``queue``: the test's own queue, home of
    the routed task (its throttled jobs go to ``queue + "-slow"``)."""
    app = Celery("proj", broker=broker, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    if broker.startswith("amqp"):  # publisher confirms (docs/integrations/celery.md)
        app.conf.broker_transport_options = {"confirm_publish": True}
    fair = FairCelery(app, url=url)
    app.conf.task_routes = (fair.router,)

    @app.task(
        base=fair.Task,
        name="proj.record",
        shared=False,
        fair_tenant="tenant",
        fair_lease=30.0,
        fair_cost=0.01,  # below any real run: the charge at the end only ever adds
    )
    def record(tenant: str, tag: str, log: str, hold: str | None = None, work: float = 0.0) -> str:
        mark(log, "start", tenant, tag)
        wait_gate(hold)
        if work:
            time.sleep(work)  # the task's own work: makes overlapping runs likely if caps broke
        mark(log, "end", tenant, tag)
        return tag

    @app.task(
        base=fair.Task, name="proj.record_brief", shared=False, fair_tenant="tenant", fair_lease=3.0
    )
    def record_brief(tenant: str, tag: str, log: str, hold: str | None = None) -> str:
        mark(log, "start", tenant, tag)
        wait_gate(hold)
        mark(log, "end", tenant, tag)
        return tag

    @app.task(base=fair.Task, name="proj.paced", shared=False, fair_tenant="tenant")
    def paced(tenant: str, tag: str, log: str, work: float) -> None:
        """Ends ``work`` seconds after its claim, when fairq starts charging its run: a stall
        of the machine inside the job does not change what its tenant is charged."""
        mark(log, "start", tenant, tag)
        claimed = fairq.current_job().lease.started_at
        time.sleep(max(0.0, claimed + work - time.time()))
        mark(log, "end", tenant, tag)

    @fair.task(name="proj.fail", shared=False, tenant="tenant", max_attempts=2, retry_base=0.05)
    def fail(tenant: str, tag: str, log: str) -> None:
        mark(log, "start", tenant, tag)
        raise RuntimeError(f"task {tag} fails on purpose")

    @app.task(
        name="proj.routed",
        shared=False,
        bind=True,
        fair_tenant="tenant",
        fair_queue=queue,
        fair_throttle=[Throttle(2, 600, f"{queue}-slow")],
    )
    def routed(self: Any, tenant: str, tag: str, log: str) -> None:
        mark(log, "start", tenant, tag)
        if self.request.retries == 0:
            raise self.retry(countdown=0)  # Celery's own retry: not counted again

    @app.task(
        base=fair.SlotTask,
        name="proj.guarded",
        shared=False,
        fair_tenant="tenant",
        fair_slots=1,
        fair_lease=30.0,  # a timed copy (due when a lease ends) never beats a release's wake
    )
    def guarded(tenant: str, tag: str, log: str, work: float = 0.0) -> None:
        mark(log, "start", tenant, tag)
        time.sleep(work)  # the task's own work: overlapping runs would show if slots broke
        mark(log, "end", tenant, tag)

    @app.task(
        base=fair.Task, name="proj.stoppable", shared=False, fair_tenant="tenant", fair_lease=1.5
    )
    def stoppable(tenant: str, tag: str, log: str) -> None:
        mark(log, "start", tenant, tag)
        job = fairq.current_job()  # set by the claim on the thread that runs the task
        deadline = time.monotonic() + GATE_DEADLINE
        while not job.cancel_requested and time.monotonic() < deadline:
            time.sleep(0.02)
        mark(log, "end", tenant, tag)
        job.raise_if_cancelled()

    return Project(app, fair, record, record_brief, paced, fail, routed, guarded, stoppable)


project = build(
    os.environ.get("FAIRQ_URL", "memory://"),
    os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/10"),
    os.environ.get("FAIRQ_TEST_QUEUE", "fq-default"),
)
app = project.celery  # what `celery -A tests.integrations.celery.proj` runs
if os.environ.get("CELERY_BROKER_WRITE_URL"):  # a worker whose every send fails (a dead broker)
    app.conf.broker_write_url = os.environ["CELERY_BROKER_WRITE_URL"]
fair = project.fair  # what `fairq relay tests.integrations.celery.proj:fair` runs
