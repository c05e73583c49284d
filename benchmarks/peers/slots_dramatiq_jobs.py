"""Dramatiq under fairq's tenant slots and router, no relay (benchmarks/peer_slots.py): the
same job as a plain actor, a ``routed_actor(slots=True)`` (the capped tenant's cap is 1, set in
the store; the others have none) and a routed actor. Broker, counter and fairq store on the
benchmark Redis, the broker on RabbitMQ when $BENCH_BROKER_URL names it; Dramatiq at the
settings docs/integrations/dramatiq.md advises (prefetch = threads, 100 ms idle poll)."""

import os
import sys

import dramatiq
from _drive import URL, counter
from _flood import drain_job
from dramatiq.brokers.redis import RedisBroker

from fairq import Throttle
from fairq.integrations.dramatiq import FairDramatiq

BROKER = os.environ.get("BENCH_BROKER_URL", URL)
if BROKER.startswith("amqp"):
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    broker: dramatiq.Broker = RabbitmqBroker(url=BROKER, confirm_delivery=True)
else:
    broker = RedisBroker(url=URL)
dramatiq.set_broker(broker)
fair = FairDramatiq(broker, url=f"{URL}?prefix=slotbench")
fair.app.queue("slotbench_dq-slow")
_client = counter()
NEVER = [Throttle(threshold=10**9, per=3600, queue="slotbench_dq-slow")]  # counted, never matched


@dramatiq.actor(queue_name="slotbench_dq", max_retries=0)
def plain_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@fair.routed_actor(tenant="tenant", queue_name="slotbench_dq", slots=True)
def slot_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@fair.routed_actor(tenant="tenant", queue_name="slotbench_dq", throttle=NEVER)
def routed_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


ACTORS = {"plain": plain_drain, "slots": slot_drain, "router": routed_drain, "capped": slot_drain}
SLOTS = 2
WORKER = [
    sys.executable, "-m", "dramatiq", "slots_dramatiq_jobs", "--processes", "1", "--threads",
    str(SLOTS), "--queues", "slotbench_dq",
]  # fmt: skip
ENV = {"dramatiq_queue_prefetch": str(SLOTS), "dramatiq_worker_timeout": "100"}


def prepare() -> None:
    """The capped tenant's cap: 1 running job in the queue."""
    fair.app.set_tenant("slotbench_dq", "capped", max_running=1)


def send(mode: str, tenant: str, seconds: float) -> None:
    ACTORS[mode].send(tenant, seconds)
