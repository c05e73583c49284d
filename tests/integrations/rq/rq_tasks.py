"""Fair RQ tasks the tests run in real ``rq worker`` and ``fairq relay`` processes.

Every task records what happened to it in the broker's Redis (a list per test, ``key``), so a
test reads the order and overlap of runs from one place whatever process ran them. The
relay may publish through another URL (``RQ_TEST_PUBLISH_URL``: a proxy the test can cut).
"""

from __future__ import annotations

import json
import os
import time

from redis import Redis

import fairq
from fairq.integrations.rq import FairRQ

BROKER_URL = os.environ.get("FAIRQ_TEST_BROKER_URL", "redis://127.0.0.1:6379/10")
broker = Redis.from_url(os.environ.get("RQ_TEST_PUBLISH_URL", BROKER_URL))
notes = Redis.from_url(BROKER_URL)
fair = FairRQ(broker)


def note(key: str, event: str, tenant: str, n: int) -> None:
    notes.rpush(key, json.dumps([event, tenant, n, os.getpid(), time.time()]))


@fair.task(queue="rq_t", tenant="tenant", lease=3.0, retry_base=0.05)
def record(tenant: str, key: str, n: int, work: float = 0.0) -> int:
    """A job that takes ``work`` seconds (simulated work, not synchronisation)."""
    note(key, "start", tenant, n)
    if work:
        time.sleep(work)
    note(key, "end", tenant, n)
    return n


@fair.task(queue="rq_t", tenant="tenant")
def paced(tenant: str, key: str, n: int, work: float) -> int:
    """Ends ``work`` seconds after its claim, when fairq starts charging its run: a stall of
    the machine inside the job does not change what its tenant is charged (no cost declared:
    fairq learns it)."""
    note(key, "start", tenant, n)
    claimed = fairq.current_job().lease.started_at
    time.sleep(max(0.0, claimed + work - time.time()))
    note(key, "end", tenant, n)
    return n


@fair.task(queue="rq_t", tenant="tenant", lease=1.0, max_attempts=20)
def brief(tenant: str, key: str, n: int) -> int:
    """A job with a short lease, to let one expire while it waits in RQ."""
    note(key, "start", tenant, n)
    note(key, "end", tenant, n)
    return n


@fair.task(queue="rq_t", tenant="tenant", lease=1.5)
def stall(tenant: str, key: str, n: int) -> int:
    """Hangs on its first run (until the test kills its worker); returns on the next."""
    note(key, "start", tenant, n)
    if notes.set(f"{key}:stalled", 1, nx=True):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # stuck, as a hung job is (polled, no long reads)
            time.sleep(0.1)
    note(key, "end", tenant, n)
    return n


@fair.task(queue="rq_t", tenant="tenant", max_attempts=2, retry_base=0.05)
def boom(tenant: str, key: str, n: int) -> None:
    note(key, "start", tenant, n)
    raise RuntimeError(f"boom {n}")


@fair.task(queue="rq_t", tenant="tenant", lease=1.5, max_attempts=3)
def stoppable(tenant: str, key: str, n: int) -> None:
    """Runs until asked to stop (``App.cancel``), then stops on the request."""
    note(key, "start", tenant, n)
    job = fairq.current_job()
    deadline = time.monotonic() + 60
    while not job.cancel_requested and time.monotonic() < deadline:
        time.sleep(0.02)
    note(key, "end", tenant, n)
    job.raise_if_cancelled()


if "RQ_TEST_WEIGHTS" in os.environ:  # a relay started by the weights test

    @fair.app.tenant_weights(os.environ["RQ_TEST_WEIGHTS_QUEUE"], every=60)
    def weights(tenants: list[str]) -> dict[str, float]:
        """The weights the test chose; the tenants asked about go to the notes' Redis."""
        notes.rpush(os.environ["RQ_TEST_WEIGHTS_QUEUE"] + ":asked", json.dumps(sorted(tenants)))
        return {t: float(w) for t, w in json.loads(os.environ["RQ_TEST_WEIGHTS"]).items()}


def plain(x: int) -> int:
    """Not fair: enqueued into RQ as usual."""
    return x
