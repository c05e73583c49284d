"""Dramatiq with and without fairq in front (benchmarks/relay_fairness.py): the same 5 ms job
as a plain actor and as a fair one; counter and fairq store on the benchmark Redis, the broker
there too unless $BENCH_BROKER_URL names RabbitMQ (then with publisher confirms, the
option docs/integrations/dramatiq.md gives, unless $BENCH_PEER_SETTINGS is ``defaults``)."""

import os
import sys

import dramatiq
from _drive import URL, counter
from _flood import drain_job, run_job
from dramatiq.brokers.redis import RedisBroker

from fairq.integrations.dramatiq import FairDramatiq

#: Read when imported (relay_fairness.py sets it first): RabbitMQ with --broker.
BROKER = os.environ.get("BENCH_BROKER_URL", URL)

if BROKER.startswith("amqp"):
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    confirm = os.environ.get("BENCH_PEER_SETTINGS", "advised") == "advised"
    broker: dramatiq.Broker = RabbitmqBroker(url=BROKER, confirm_delivery=confirm)
else:
    broker = RedisBroker(url=URL)
dramatiq.set_broker(broker)
fair = FairDramatiq(broker, url=f"{URL}?prefix=relaybench")
_client = counter()


@dramatiq.actor(queue_name="plain", max_retries=0)
def plain_stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)


@dramatiq.actor(queue_name="plain", max_retries=0)
def plain_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@fair.actor(tenant="tenant", queue_name="fair")
def fair_stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)


@fair.actor(tenant="tenant", queue_name="fair")
def fair_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


SLOTS = 2
WORKER = [
    sys.executable, "-m", "dramatiq", "relay_dramatiq_jobs", "--processes", "1", "--threads",
    str(SLOTS),
]  # fmt: skip


def send(fair_mode: bool, tenant: str, at: float) -> None:
    (fair_stamp if fair_mode else plain_stamp).send(tenant, at)


def send_drain(fair_mode: bool, n: int, seconds: float) -> None:
    for i in range(n):
        (fair_drain if fair_mode else plain_drain).send(f"t{i % 10}", seconds)
