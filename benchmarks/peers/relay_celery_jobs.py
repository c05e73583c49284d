"""Celery with and without fairq in front (benchmarks/relay_fairness.py, relay_throughput.py):
the same 5 ms job as a plain task and as a fair one; counter and fairq store on the benchmark
Redis, the broker there too unless $BENCH_BROKER_URL names RabbitMQ. $BENCH_PEER_SETTINGS
(``advised``, the default, or ``defaults``) chooses between the settings
docs/integrations/celery.md gives (late acks, prefetch 1, publisher confirms on RabbitMQ) and
Celery's own defaults."""

import os
import sys

from _drive import URL, counter
from _flood import drain_job, run_job
from celery import Celery

from fairq.integrations.celery import FairCelery

#: Read when imported (the benchmarks set them first): RabbitMQ with --broker.
BROKER = os.environ.get("BENCH_BROKER_URL", URL)
ADVISED = os.environ.get("BENCH_PEER_SETTINGS", "advised") == "advised"

app = Celery("relay_celery_jobs", broker=BROKER)
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False)
if ADVISED:  # docs/integrations/celery.md
    app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1)
    if BROKER.startswith("amqp"):
        app.conf.broker_transport_options = {"confirm_publish": True}
fair = FairCelery(app, url=f"{URL}?prefix=relaybench")
_client = counter()


@app.task(name="plain_stamp")
def plain_stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)


@app.task(name="plain_drain")
def plain_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@app.task(base=fair.Task, name="fair_stamp", fair_tenant="tenant")
def fair_stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)


@app.task(base=fair.Task, name="fair_drain", fair_tenant="tenant")
def fair_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


SLOTS = 2
WORKER = [
    sys.executable, "-m", "celery", "-A", "relay_celery_jobs", "worker", "--concurrency",
    str(SLOTS), "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
    "--without-heartbeat",
]  # fmt: skip


def send(fair_mode: bool, tenant: str, at: float) -> None:
    (fair_stamp if fair_mode else plain_stamp).delay(tenant, at)


def send_drain(fair_mode: bool, n: int, seconds: float) -> None:
    for i in range(n):
        (fair_drain if fair_mode else plain_drain).delay(f"t{i % 10}", seconds)
