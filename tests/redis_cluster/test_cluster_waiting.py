"""Waiting for work on queues of several masters (waiting.py ClusterWaiter): one BLPOP per
slot side by side; the first woken ends the others, which take no wake-up token."""

from __future__ import annotations

import threading

import redis

from fairq.backends.redis import RedisBackend
from fairq.contract import DequeueParams, EnqueueParams, WaitParams
from fairq.job import Lease

from .helpers import QUEUES, new_job
from .servers import LocalCluster, wait_until

Q0, Q2 = QUEUES[0], QUEUES[2]  # on two masters


def blocked(cluster: LocalCluster, queue: str) -> int:
    """Clients blocked in a command on the master of ``queue``."""
    with redis.Redis(port=cluster.master_of(f"x:{{{queue}}}:meta")) as master:
        return sum(1 for c in master.client_list() if "b" in c["flags"])


def test_a_wait_on_two_masters_ends_when_either_gets_work(
    backend: RedisBackend, cluster: LocalCluster
) -> None:
    waiter = threading.Thread(
        target=backend.wait, args=(WaitParams(queues=[Q0, Q2], timeout=120.0),), daemon=True
    )
    waiter.start()
    wait_until(lambda: blocked(cluster, Q0) and blocked(cluster, Q2), "both BLPOPs")
    backend.enqueue(EnqueueParams(jobs=[new_job(1, queue=Q2)], now=0.0))
    waiter.join(60.0)
    assert not waiter.is_alive(), "the wait did not end when a job came to its second queue"
    wait_until(lambda: not blocked(cluster, Q0), "the other BLPOP to be ended")


def test_a_waiting_dequeue_across_masters_takes_what_arrives(
    backend: RedisBackend, cluster: LocalCluster
) -> None:
    got: list[Lease] = []
    params = DequeueParams(queues=[Q0, Q2], worker_id="w", now=1.0, wait=120.0)
    taker = threading.Thread(target=lambda: got.extend(backend.dequeue(params).leases))
    taker.start()
    wait_until(lambda: blocked(cluster, Q0) and blocked(cluster, Q2), "both BLPOPs")
    backend.enqueue(EnqueueParams(jobs=[new_job(1, queue=Q0)], now=1.0))
    taker.join(60.0)
    assert not taker.is_alive()
    assert [(lease.job_id, lease.queue) for lease in got] == [("j1", Q0)]


def test_a_wait_on_two_masters_ends_by_its_timeout(backend: RedisBackend) -> None:
    for timeout in (0.0, 0.05):
        waiter = threading.Thread(
            target=backend.wait, args=(WaitParams(queues=[Q0, Q2], timeout=timeout),)
        )
        waiter.start()
        waiter.join(30.0)
        assert not waiter.is_alive(), f"wait(…, {timeout}) did not end by its timeout"
