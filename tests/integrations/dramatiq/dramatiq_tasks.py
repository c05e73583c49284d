"""The fair actors the Dramatiq integration tests run, in real ``dramatiq`` worker processes.

``build`` declares them on a fresh broker (a namespace of its own per test) and fairq store;
the test process builds its own copy to send jobs, and a worker or relay process started by a
test builds one from its environment (``FAIRQ_TEST_*``) when it imports this module. Each
actor notes what it does, one line per event, in the file ``$FAIRQ_TEST_RECORD``:
``start|end TENANT N PID``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from dramatiq import Middleware
from dramatiq.broker import Broker
from dramatiq.brokers.redis import RedisBroker
from dramatiq.message import Message
from dramatiq.middleware import MiddlewareError

import fairq
from fairq.integrations.dramatiq import FairActor, FairDramatiq, RoutedActor
from fairq.integrations.dramatiq.slots import WAITER

QUEUE = "fair"
#: Short, so a killed worker's job comes back within the test.
LEASE = 3.0
SLOT_LEASE = 30.0


def note(event: str, tenant: str, n: int) -> None:
    """One line in the record; a single short append is atomic between processes."""
    with open(os.environ["FAIRQ_TEST_RECORD"], "a", encoding="utf-8") as record:
        record.write(f"{event} {tenant} {n} {os.getpid()}\n")


def make_broker(broker_url: str, namespace: str) -> Broker:
    """Redis under the test's namespace, or RabbitMQ (``amqp://``) with publisher confirms,
    the option docs/integrations/dramatiq.md gives (the queues then carry the namespace)."""
    if broker_url.startswith("amqp"):
        from dramatiq.brokers.rabbitmq import RabbitmqBroker  # needs pika (fairq[dramatiq])

        return RabbitmqBroker(url=broker_url, confirm_delivery=True)
    return RedisBroker(url=broker_url, namespace=namespace)


def queue(name: str, broker_url: str, namespace: str) -> str:
    """A queue's name on the broker: RabbitMQ has no namespaces, so the test's is in it."""
    return f"{name}-{namespace}" if broker_url.startswith("amqp") else name


class RefuseTimedCopies(Middleware):
    """A broker that refuses every delayed message carrying a place in a tenant's line (a
    parked job's timed copy, tenant slots) and sends every other: installed in a worker
    started with ``$FAIRQ_TEST_REFUSE_TIMED`` set (a MiddlewareError is what Dramatiq lets
    through ``broker.enqueue``; it logs and swallows any other)."""

    def before_enqueue(self, broker: Broker, message: Message[object], delay: int) -> None:
        if delay and message.options.get(WAITER) is not None:
            raise MiddlewareError("refused: the broker takes no timed copy (test)")


@dataclass
class Actors:
    broker: Broker
    fair: FairDramatiq
    work: FairActor[[str, int, float], None]
    paced: FairActor[[str, int, float], None]
    hold: FairActor[[str, int], None]
    broken: FairActor[[str, int], None]
    stoppable: FairActor[[str, int], None]
    guarded: RoutedActor[[str, int, float], None]


def build(broker_url: str, namespace: str, store_url: str, *, lease: float = LEASE) -> Actors:
    broker = make_broker(broker_url, namespace)
    fair = FairDramatiq(broker, url=store_url)
    fair_queue, guarded_queue = (queue(q, broker_url, namespace) for q in (QUEUE, "guarded"))

    @fair.actor(tenant="tenant", queue_name=fair_queue, lease=lease, max_retries=3, min_backoff=100)
    def work(tenant: str, n: int, seconds: float = 0.0) -> None:
        note("start", tenant, n)
        time.sleep(seconds)  # the job's own work
        note("end", tenant, n)

    @fair.actor(tenant="tenant", queue_name=fair_queue, lease=lease, max_retries=3, min_backoff=100)
    def paced(tenant: str, n: int, seconds: float) -> None:
        """Ends ``seconds`` after its claim, when fairq starts charging its run: a stall of
        the machine inside the job does not change what its tenant is charged."""
        note("start", tenant, n)
        claimed = fairq.current_job().lease.started_at
        time.sleep(max(0.0, claimed + seconds - time.time()))
        note("end", tenant, n)

    @fair.actor(tenant="tenant", queue_name=fair_queue, lease=lease, max_retries=1, min_backoff=100)
    def hold(tenant: str, n: int) -> None:
        """Runs until the file $FAIRQ_TEST_RELEASE exists: a job to kill mid-run."""
        note("start", tenant, n)
        release = Path(os.environ["FAIRQ_TEST_RELEASE"])
        deadline = time.monotonic() + 60
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        note("end", tenant, n)

    @fair.actor(tenant="tenant", queue_name=fair_queue, lease=lease, max_retries=1, min_backoff=100)
    def broken(tenant: str, n: int) -> None:
        note("start", tenant, n)
        raise RuntimeError("broken on purpose")

    @fair.actor(tenant="tenant", queue_name=fair_queue, lease=lease, max_retries=3, min_backoff=100)
    def stoppable(tenant: str, n: int) -> None:
        """Runs until asked to stop (``App.cancel``), then stops on the request."""
        note("start", tenant, n)
        job = fairq.current_job()
        deadline = time.monotonic() + 60
        while not job.cancel_requested and time.monotonic() < deadline:
            time.sleep(0.02)
        note("end", tenant, n)
        job.raise_if_cancelled()

    # a long slot lease: a timed copy (due when a lease ends) never beats a release's wake
    @fair.routed_actor(tenant="tenant", queue_name=guarded_queue, slots=True, lease=SLOT_LEASE)
    def guarded(tenant: str, n: int, seconds: float) -> None:
        """A plain Dramatiq actor (no relay) run within its tenant's cap by slots."""
        note("start", tenant, n)
        time.sleep(seconds)  # the job's own work
        note("end", tenant, n)

    return Actors(broker, fair, work, paced, hold, broken, stoppable, guarded)


if "FAIRQ_TEST_STORE" in os.environ:  # a worker or relay process started by a test
    actors = build(
        os.environ["FAIRQ_TEST_BROKER"],
        os.environ["FAIRQ_TEST_NAMESPACE"],
        os.environ["FAIRQ_TEST_STORE"],
    )
    broker = actors.broker
    fair = actors.fair
    if os.environ.get("FAIRQ_TEST_REFUSE_TIMED"):
        broker.add_middleware(RefuseTimedCopies())
