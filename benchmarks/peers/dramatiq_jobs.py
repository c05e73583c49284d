"""Dramatiq's no-op actor on the Redis broker."""

import dramatiq
from _drive import URL, counter, mark_done
from _flood import run_job
from dramatiq.brokers.redis import RedisBroker

dramatiq.set_broker(RedisBroker(url=URL))
_client = counter()


@dramatiq.actor
def noop(tenant: str) -> None:
    mark_done(_client)


@dramatiq.actor
def empty(tenant: str) -> None:
    """Nothing at all: what Dramatiq itself costs per message (see dramatiq_bench.py)."""


@dramatiq.actor
def stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)
