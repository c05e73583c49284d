"""RQ tasks that stay in RQ (no relay) under fairq's router and tenant slots."""

from __future__ import annotations

import os
import time

from redis import Redis
from rq_tasks import BROKER_URL, note

from fairq import Throttle
from fairq.integrations.rq import FairRQ

broker = Redis.from_url(BROKER_URL)
fair = FairRQ(broker)

HOME = "rq_g"
SLOW = "rq_g_slow"


@fair.guard(queue=HOME, tenant="tenant", throttle=[Throttle(threshold=2, per=3600, queue=SLOW)])
def routed(tenant: str, n: int) -> int:
    return n


# a long slot lease: a timed copy (due when a lease ends) never beats a release's wake
@fair.guard(tenant="tenant", slots=True, slot_lease=30.0)
def slotted(tenant: str, key: str, n: int, work: float = 0.0, fail: bool = False) -> int:
    """Runs only while its tenant holds a slot in the job's queue."""
    note(key, "start", tenant, n)
    if work:
        time.sleep(work)  # simulated work
    note(key, "end", tenant, n)
    if fail:
        raise RuntimeError(f"boom {n}")
    return n


@fair.guard(tenant="tenant", slots=True, slot_lease=1.5)
def hang(tenant: str, key: str, n: int) -> None:
    """Hangs (until the test kills its worker) while holding its tenant's slot."""
    note(key, "start", tenant, n)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and os.getppid() != 1:
        time.sleep(0.1)
