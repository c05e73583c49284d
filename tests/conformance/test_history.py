"""History-aware fairness (a queue with a half-life): a tenant that just had a big batch served
starts behind when it returns, by at most ``max_debt``, so it is never starved. Without a
half-life the old rule holds: an idle tenant carries no debt.

The debt bound. A tenant returning when the clock is ``V`` starts at
``S = max(F, V + min(usage, max_debt))``. Every other eligible tenant ``i`` has a tag of at least
``V`` and each of its jobs adds ``cost_i / w_i``; it is served before the returning tenant only
while its tag is at most ``S`` (ties go to the older head job). So when the returning tenant's
own ``F`` is at most ``V + max_debt``, it waits at most ``sum_i (floor(max_debt * w_i / cost_i)
+ 1)`` dispatches while the others stay backlogged.
"""

from __future__ import annotations

import math

from fairq.contract import Backend, GetQueueParams, QueueSettings, SetQueueParams, StatsParams
from fairq.policy import history

from .helpers import Q, ack, enqueue, new_jobs, stat, take, take_one

BATCH = 200


def serve_a_batch(backend: Backend, tenant: str = "a") -> float:
    """One worker runs ``tenant``'s batch alone, one job a second; returns when it drained."""
    enqueue(backend, new_jobs(tenant, range(BATCH), lease=100.0))
    now = 0.0
    for _ in range(BATCH):
        ack(backend, take_one(backend, now), now + 1.0)
        now += 1.0
    return now


def set_queue(backend: Backend, **settings: float | None) -> None:
    queue_settings = QueueSettings(queue=Q, **settings)  # type: ignore[arg-type]
    backend.set_queue(SetQueueParams(settings=queue_settings, now=0.0))


def first_turn_after_returning(backend: Backend, now: float) -> int:
    """b and c become backlogged, then a returns: how many dispatches go before a's first."""
    enqueue(backend, new_jobs("b", range(1000, 1100), lease=1000.0), now=now)
    enqueue(backend, new_jobs("c", range(2000, 2100), lease=1000.0), now=now)
    enqueue(backend, new_jobs("a", range(3000, 3005), lease=1000.0), now=now)
    tenants = [lease.tenant for lease in take(backend, now, limit=150)]
    return tenants.index("a")


def test_without_a_half_life_a_returning_tenant_carries_no_debt(backend: Backend) -> None:
    now = serve_a_batch(backend)
    # V = 199 (a's last start); a's F = 200; b and c start at 199, a at max(200, 199).
    assert first_turn_after_returning(backend, now) == 4


def test_with_a_half_life_a_tenant_just_served_starts_behind_by_at_most_max_debt(
    backend: Backend,
) -> None:
    set_queue(backend, half_life=3600.0, max_debt=10.0)
    assert backend.get_queue(GetQueueParams(queue=Q)) == QueueSettings(
        queue=Q, half_life=3600.0, max_debt=10.0
    )
    now = serve_a_batch(backend)
    assert stat(backend, "a").usage > 10.0  # its debt is capped below
    bound = 2 * (math.floor(10.0 * 1.0 / 1.0) + 1)  # b and c: weight 1, cost 1
    assert first_turn_after_returning(backend, now) == bound  # reached exactly: a ties at 209


def test_the_default_debt_cap_bounds_the_wait_too(backend: Backend) -> None:
    set_queue(backend, half_life=1e6)  # hardly decays: a's usage is about 200
    now = serve_a_batch(backend)
    assert backend.get_queue(GetQueueParams(queue=Q)).max_debt == 60.0
    assert first_turn_after_returning(backend, now) == 2 * (60 + 1)


def test_history_fades_with_the_half_life(backend: Backend) -> None:
    set_queue(backend, half_life=60.0, max_debt=60.0)
    now = serve_a_batch(backend)
    # Ten half-lives later a's usage of about 86 has decayed to under 0.1: barely behind.
    assert first_turn_after_returning(backend, now + 600.0) == 4


def test_usage_is_the_decayed_sum_of_every_change_of_the_finish_tag(backend: Backend) -> None:
    """Bit for bit what policy.history gives for the same events in the same order."""
    set_queue(backend, half_life=30.0)
    now = serve_a_batch(backend)
    usage = usage_at = 0.0
    for start in range(BATCH):
        usage = history.add_usage(usage, usage_at, float(start), 30.0, 1.0)  # dispatch: +1
        usage_at = float(start)
        usage = history.add_usage(usage, usage_at, start + 1.0, 30.0, 0.0)  # ack: charged 1 s
        usage_at = start + 1.0
    assert stat(backend, "a").usage == usage
    (row,) = backend.stats(StatsParams(queue=Q, tenant="a", now=now + 45.0))
    assert row.usage == history.decayed(usage, usage_at, now + 45.0, 30.0)


def test_a_tenant_still_backlogged_is_not_put_behind_again(backend: Backend) -> None:
    """The debt applies when a tenant returns from idle, not at every new job of a backlog."""
    set_queue(backend, half_life=3600.0, max_debt=10.0)
    enqueue(backend, new_jobs("a", range(50), lease=1000.0))
    enqueue(backend, new_jobs("b", range(100, 150), lease=1000.0))
    first = [lease.tenant for lease in take(backend, 0.0, limit=10)]
    enqueue(backend, new_jobs("a", range(200, 210), lease=1000.0), now=0.0)
    then = [lease.tenant for lease in take(backend, 0.0, limit=10)]
    assert first == then == ["a", "b"] * 5


def test_the_debt_survives_the_end_of_a_job_still_in_flight(backend: Backend) -> None:
    """The debt is carried in the finish tag, so the retag at an in-flight job's ack keeps it."""
    set_queue(backend, half_life=3600.0, max_debt=10.0)
    enqueue(backend, new_jobs("a", range(BATCH), lease=1000.0))
    now = 0.0
    for _ in range(BATCH - 1):
        ack(backend, take_one(backend, now), now + 1.0)
        now += 1.0
    in_flight = take_one(backend, now)  # a's last job is still running when a returns
    enqueue(backend, new_jobs("b", range(1000, 1100), lease=1000.0), now=now)
    enqueue(backend, new_jobs("c", range(2000, 2100), lease=1000.0), now=now)
    enqueue(backend, new_jobs("a", range(3000, 3005), lease=1000.0), now=now)
    ack(backend, in_flight, now + 0.5)
    tenants = [lease.tenant for lease in take(backend, now + 0.5, limit=150)]
    assert tenants.index("a") >= 2 * 10  # still about max_debt behind, not level with V
