"""Dramatiq's no-op actor on the Redis broker."""

import dramatiq
from _drive import URL, counter, mark_done
from dramatiq.brokers.redis import RedisBroker

dramatiq.set_broker(RedisBroker(url=URL))
_client = counter()


@dramatiq.actor
def noop(tenant: str) -> None:
    mark_done(_client)
