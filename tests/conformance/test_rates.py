"""Rate limits per tenant (GCRA): a tenant over its rate leaves the eligible set, the others are
served meanwhile, and it is re-admitted at exactly ``limited_until`` with its order kept and no
attempt burnt."""

from __future__ import annotations

from fairq.contract import Backend, GetQueueParams, MaintainParams, QueueSettings, SetQueueParams
from fairq.job import JobState
from fairq.policy.rate import Rate

from .helpers import Q, enqueue, job, new_jobs, set_tenant, stat, take, take_one

EPSILON = 0.001
ONE_PER_10S = Rate(1, 10.0)


def set_queue(backend: Backend, now: float = 0.0, **settings: object) -> None:
    queue_settings = QueueSettings(queue=Q, **settings)  # type: ignore[arg-type]
    backend.set_queue(SetQueueParams(settings=queue_settings, now=now))


def test_a_limited_tenant_waits_while_others_are_served_and_returns_exactly_on_time(
    backend: Backend,
) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    enqueue(backend, new_jobs("b", range(10, 20)))
    set_tenant(backend, "a", rate=ONE_PER_10S)
    assert take_one(backend, 0.0).job_id == "j0"
    row = stat(backend, "a")
    assert (row.rate, row.limited_until, row.ready) == (ONE_PER_10S, 10.0, 2)
    assert [lease.tenant for lease in take(backend, 0.0, limit=5)] == ["b"] * 5
    assert [lease.tenant for lease in take(backend, 10.0 - EPSILON, limit=4)] == ["b"] * 4
    again = take_one(backend, 10.0)  # b has one job left, but a is back and its tag is older
    assert (again.tenant, again.job_id, again.attempt) == ("a", "j1", 1)
    assert stat(backend, "a").limited_until == 20.0


def test_waiting_on_a_rate_costs_no_attempt_and_keeps_the_fifo(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3), max_attempts=1))
    set_tenant(backend, "a", rate=ONE_PER_10S)
    served: list[str] = []
    for now in (0.0, 5.0, 10.0 - EPSILON, 10.0, 15.0, 20.0, 25.0):
        served += [lease.job_id for lease in take(backend, now, limit=3)]
        if now == 5.0:
            info = job(backend, "j1")
            assert (info.state, info.attempts) == (JobState.READY, 0)
    assert served == ["j0", "j1", "j2"]
    assert [job(backend, f"j{n}").started_at for n in range(3)] == [0.0, 10.0, 20.0]
    row = stat(backend, "a")
    assert (row.failed, row.dead, row.running) == (0, 0, 3)


def test_a_lone_limited_tenant_gets_nothing_until_limited_until(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3), lease=1000.0))
    set_tenant(backend, "a", rate=Rate(2, 5.0))  # one start every 2.5 s
    take_one(backend, 1.0)
    assert take(backend, 3.5 - EPSILON) == []
    assert take_one(backend, 3.5).job_id == "j1"
    assert take(backend, 3.5) == []


def test_maintain_reports_limited_until_as_due_and_readmits_on_its_own(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2), lease=1000.0))
    set_tenant(backend, "a", rate=ONE_PER_10S)
    take_one(backend, 2.0)
    assert backend.maintain(MaintainParams(now=3.0)).next_due == 12.0
    backend.maintain(MaintainParams(now=12.0))
    assert stat(backend, "a").limited_until is None
    assert backend.maintain(MaintainParams(now=12.0)).next_due == 1002.0  # the lease deadline


def test_the_queue_default_rate_applies_to_tenants_without_their_own(backend: Backend) -> None:
    set_queue(backend, rate=ONE_PER_10S)
    assert backend.get_queue(GetQueueParams(queue=Q)).rate == ONE_PER_10S
    enqueue(backend, new_jobs("a", range(5)))
    enqueue(backend, new_jobs("b", range(10, 15)))
    set_tenant(backend, "b", rate=Rate(2, 10.0))  # its own, faster: one start every 5 s
    assert stat(backend, "a").rate == ONE_PER_10S
    assert stat(backend, "b").rate == Rate(2, 10.0)
    timeline = [
        (now, sorted(lease.tenant for lease in take(backend, now, limit=5)))
        for now in (0.0, 5.0 - EPSILON, 5.0, 10.0 - EPSILON, 10.0)
    ]
    assert timeline == [
        (0.0, ["a", "b"]),
        (5.0 - EPSILON, []),
        (5.0, ["b"]),
        (10.0 - EPSILON, []),
        (10.0, ["a", "b"]),
    ]
    set_tenant(backend, "b", rate=None, now=10.0)  # back to the queue's default
    assert stat(backend, "b").rate == ONE_PER_10S


def test_a_burst_starts_back_to_back_then_the_rate_holds(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(8), lease=1000.0))
    set_tenant(backend, "a", rate=Rate(1, 10.0, burst=3))
    assert len(take(backend, 0.0, limit=6)) == 3
    assert stat(backend, "a").limited_until == 10.0
    assert take(backend, 10.0 - EPSILON) == []
    assert len(take(backend, 10.0, limit=6)) == 1
    assert stat(backend, "a").limited_until == 20.0
    assert len(take(backend, 45.0, limit=6)) == 3  # idle time refills the burst, never beyond it
    assert stat(backend, "a").limited_until == 55.0


def test_removing_the_rate_at_run_time_readmits_at_once(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    set_tenant(backend, "a", rate=ONE_PER_10S)
    take_one(backend, 0.0)
    assert take(backend, 2.0) == []
    row = set_tenant(backend, "a", rate=None, now=2.0)
    assert (row.rate, row.limited_until) == (None, None)
    assert [lease.job_id for lease in take(backend, 2.0, limit=5)] == ["j1", "j2"]


def test_raising_the_rate_at_run_time_recomputes_the_hold(backend: Backend) -> None:
    """The hold is ``tat - tolerance`` under the new rate: a larger burst frees the tenant at
    once; a shorter interval alone does not shorten the wait already earned (tat stays)."""
    enqueue(backend, new_jobs("a", range(4)))
    set_tenant(backend, "a", rate=ONE_PER_10S)
    take_one(backend, 0.0)
    assert set_tenant(backend, "a", rate=Rate(10, 10.0), now=2.0).limited_until == 10.0
    assert take(backend, 2.0) == []
    assert set_tenant(backend, "a", rate=Rate(10, 10.0, burst=10), now=2.0).limited_until is None
    # tat 10 -> 11 -> 12: the second start leaves tat - tolerance = 3 > now, a hold again
    assert [lease.job_id for lease in take(backend, 2.0, limit=5)] == ["j1", "j2"]
    assert stat(backend, "a").limited_until == 3.0


def test_a_queue_default_rate_change_resettles_its_tenants(backend: Backend) -> None:
    set_queue(backend, rate=ONE_PER_10S)
    enqueue(backend, new_jobs("a", range(3)))
    take_one(backend, 0.0)
    assert stat(backend, "a").limited_until == 10.0
    set_queue(backend, now=1.0, rate=None)
    assert backend.get_queue(GetQueueParams(queue=Q)).rate is None
    row = stat(backend, "a")
    assert (row.rate, row.limited_until) == (None, None)
    assert len(take(backend, 1.0, limit=5)) == 2


def test_a_rate_set_while_running_free_holds_nothing_until_the_next_start(
    backend: Backend,
) -> None:
    enqueue(backend, new_jobs("a", range(3)))
    take_one(backend, 0.0)
    assert set_tenant(backend, "a", rate=ONE_PER_10S, now=1.0).limited_until is None
    take_one(backend, 1.0)
    assert stat(backend, "a").limited_until == 11.0


def test_rate_limits_are_per_queue(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(2)))
    enqueue(backend, new_jobs("a", range(10, 12), queue="other"))
    set_tenant(backend, "a", rate=ONE_PER_10S)
    assert len(take(backend, 0.0, limit=5)) == 1
    assert len(take(backend, 0.0, limit=5, queues=["other"])) == 2
    assert stat(backend, "a", queue="other").rate is None
