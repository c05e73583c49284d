"""Celery under fairq's tenant slots and router, no relay (benchmarks/peer_slots.py): the same
job as a plain task, a ``fair.SlotTask`` (cap 1 for the capped tenant; a cap no run reaches
for the cost figures) and a task routed by ``fair.router``. Broker, counter and fairq store on
the benchmark Redis, the broker on RabbitMQ when $BENCH_BROKER_URL names it. Celery at the
settings docs/integrations/celery.md advises (late acks, prefetch 1)."""

import os
import sys

from _drive import URL, counter
from _flood import drain_job
from celery import Celery

from fairq import Throttle
from fairq.integrations.celery import FairCelery

BROKER = os.environ.get("BENCH_BROKER_URL", URL)
QUEUE = "slotbench"

app = Celery("slots_celery_jobs", broker=BROKER)
app.conf.update(
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_default_queue=QUEUE,
)
fair = FairCelery(app, url=f"{URL}?prefix=slotbench")
app.conf.task_routes = (fair.router,)
_client = counter()
NEVER = [Throttle(threshold=10**9, per=3600, queue=f"{QUEUE}-slow")]  # counted, never matched


@app.task(name="plain_drain")
def plain_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@app.task(base=fair.SlotTask, name="slot_drain", fair_tenant="tenant", fair_slots=10**6)
def slot_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@app.task(name="routed_drain", fair_tenant="tenant", fair_throttle=NEVER, fair_queue=QUEUE)
def routed_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@app.task(base=fair.SlotTask, name="capped", fair_tenant="tenant", fair_slots=1)
def capped(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


TASKS = {"plain": plain_drain, "slots": slot_drain, "router": routed_drain, "capped": capped}
SLOTS = 2
WORKER = [
    sys.executable, "-m", "celery", "-A", "slots_celery_jobs", "worker", "--concurrency",
    str(SLOTS), "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
    "--without-heartbeat", "--queues", QUEUE,
]  # fmt: skip


def send(mode: str, tenant: str, seconds: float) -> None:
    TASKS[mode].delay(tenant, seconds)
