"""RQ under fairq's tenant slots and router, no relay (benchmarks/peer_slots.py): the same job
as a plain function, a ``@fair.guard(slots=…)`` one (cap 1 for the capped tenant; a cap no run
reaches for the cost figures) and a routed one. RQ's Redis, the counter and the fairq store on
one Redis; one of the two workers runs RQ's scheduler (the deferred jobs' timed copies)."""

import sys

from _drive import URL, counter
from _flood import drain_job
from rq import Queue

from fairq import Throttle
from fairq.integrations.rq import FairRQ

_client = counter()
fair = FairRQ(_client, url=f"{URL}?prefix=slotbench")
QUEUE = "slotbench"
plain_queue = Queue(QUEUE, connection=_client)
fair_queue = fair.queue(QUEUE)
NEVER = [Throttle(threshold=10**9, per=3600, queue="slotbench-slow")]  # counted, never matched


def plain_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@fair.guard(queue=QUEUE, tenant="tenant", slots=10**6)
def slot_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@fair.guard(queue=QUEUE, tenant="tenant", throttle=NEVER)
def routed_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@fair.guard(queue=QUEUE, tenant="tenant", slots=1)
def capped(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


FUNCTIONS = {"plain": plain_drain, "slots": slot_drain, "router": routed_drain, "capped": capped}
SLOTS = 2
# -c imports this module in the worker itself, not in every forked work horse
_rq = [sys.executable, "-m", "rq.cli", "worker", "--url", URL, "--quiet", "-c", "slots_rq_jobs"]
WORKERS = [[*_rq, "--with-scheduler", QUEUE], [*_rq, QUEUE]]


def send(mode: str, tenant: str, seconds: float) -> None:
    queue = fair_queue if mode == "router" else plain_queue
    queue.enqueue(FUNCTIONS[mode], tenant, seconds)
