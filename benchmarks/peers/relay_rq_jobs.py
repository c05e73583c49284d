"""RQ with and without fairq in front (benchmarks/relay_fairness.py): the same 5 ms job as a
plain function and as a fair task; RQ's Redis, the counter and the fairq store on one Redis."""

import sys

from _drive import URL, counter
from _flood import drain_job, run_job
from rq import Queue

from fairq.integrations.rq import FairRQ

_client = counter()
fair = FairRQ(_client, url=f"{URL}?prefix=relaybench")
plain_queue = Queue("plain", connection=_client)
fair_queue = fair.queue("fair")


def plain_stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)


def plain_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


@fair.task(queue="fair", tenant="tenant")
def fair_stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)


@fair.task(queue="fair", tenant="tenant")
def fair_drain(tenant: str, seconds: float) -> None:
    drain_job(_client, seconds)


SLOTS = 2
# -c imports this module in the worker itself, not in every forked work horse
_rq = [sys.executable, "-m", "rq.cli", "worker", "--url", URL, "--quiet", "-c", "relay_rq_jobs"]
_rq += ["plain", "fair"]
WORKER = _rq  # started SLOTS times: one job at a time per RQ worker


def send(fair_mode: bool, tenant: str, at: float) -> None:
    if fair_mode:
        fair_queue.enqueue(fair_stamp, tenant, at)
    else:
        plain_queue.enqueue(plain_stamp, tenant, at)


def send_drain(fair_mode: bool, n: int, seconds: float) -> None:
    for i in range(n):
        if fair_mode:
            fair_queue.enqueue(fair_drain, f"t{i % 10}", seconds)
        else:
            plain_queue.enqueue(plain_drain, f"t{i % 10}", seconds)
