"""Fair in worker-seconds: the real run time replaces the estimate charged at dispatch."""

from __future__ import annotations

from fairq.contract import Backend, HeartbeatParams, MaintainParams, StatsParams

from .helpers import ack, enqueue, new_job, new_jobs, take, take_one

RUN_SECONDS = {"slow": 10.0, "fast": 1.0}


def test_a_tenant_whose_jobs_run_10x_longer_gets_a_tenth_of_the_jobs_and_equal_time(
    backend: Backend,
) -> None:
    """One worker loop; both estimate 1 s per job. Tolerance: shares within 10% after 550 jobs."""
    enqueue(backend, new_jobs("slow", range(600)))
    enqueue(backend, new_jobs("fast", range(600, 1200)))
    now = 0.0
    jobs = {"slow": 0, "fast": 0}
    seconds = {"slow": 0.0, "fast": 0.0}
    for _ in range(550):
        lease = take_one(backend, now)
        now += RUN_SECONDS[lease.tenant]
        ack(backend, lease, now)
        jobs[lease.tenant] += 1
        seconds[lease.tenant] += RUN_SECONDS[lease.tenant]
    assert 0.09 <= jobs["slow"] / jobs["fast"] <= 0.11, jobs
    assert 0.9 <= seconds["slow"] / seconds["fast"] <= 1.1, seconds


def test_instant_jobs_are_charged_the_minimum_and_still_take_turns(backend: Backend) -> None:
    enqueue(backend, new_jobs("a", range(10)))
    enqueue(backend, new_jobs("b", range(10, 20)))
    taken = []
    for _ in range(10):
        lease = take_one(backend, 5.0)
        ack(backend, lease, 5.0)
        taken.append(lease.tenant)
    assert taken.count("a") == 5


def test_a_tenant_whose_runs_crash_keeps_its_share(backend: Backend) -> None:
    """A crash is not consumption: a run whose lease expires is charged its estimate, not the
    lease, so a tenant whose worker died keeps its turn (it used to be charged the whole
    lease, and starved for as long)."""
    enqueue(backend, new_jobs("crashy", range(100), lease=10.0, max_attempts=1000))
    enqueue(backend, new_jobs("fine", range(100, 1200)))
    now = 0.0
    jobs = {"crashy": 0, "fine": 0}
    for _ in range(550):
        lease = take_one(backend, now)
        jobs[lease.tenant] += 1
        if lease.tenant == "crashy":
            now = lease.deadline  # never acked: the next dequeue finds the lease expired
        else:
            now += 1.0
            ack(backend, lease, now)
    assert 0.9 <= jobs["crashy"] / jobs["fine"] <= 1.1, jobs


def test_an_expired_lease_is_charged_up_to_its_last_heartbeat(backend: Backend) -> None:
    """Charged at expiry: the estimate at dispatch, raised by each heartbeat to the time run
    then. A run that was seen alive for 4 s and then lost costs what a 4 s run costs."""
    enqueue(backend, [new_job(0, "a", lease=10.0, cost=1.0), new_job(1, "b", cost=1.0)])
    lost, done = take(backend, 0.0, limit=2)
    assert {lost.tenant, done.tenant} == {"a", "b"}
    if lost.tenant == "b":
        lost, done = done, lost
    backend.heartbeat(HeartbeatParams(tokens=[lost.token], now=4.0))  # deadline 14
    ack(backend, done, 4.0)  # b's run took 4 s
    (expired,) = backend.maintain(MaintainParams(now=14.0)).expired
    assert (expired.job_id, expired.tenant, expired.attempt, expired.dead) == ("j0", "a", 1, False)
    assert expired.deadline == 14.0
    usage = {row.tenant: row.usage for row in backend.stats(StatsParams(now=20.0))}
    assert usage["a"] == usage["b"] > 0  # both charged 1 at dispatch, then 3 more at 4 s


def test_an_expired_lease_without_heartbeats_is_charged_its_estimate(backend: Backend) -> None:
    """Charged as a run still going without a heartbeat: the estimate, nothing more."""
    enqueue(backend, [new_job(0, "a", lease=30.0, cost=2.5), new_job(1, "b", lease=90.0, cost=2.5)])
    take(backend, 0.0, limit=2)
    assert len(backend.maintain(MaintainParams(now=31.0)).expired) == 1
    rows = {row.tenant: row for row in backend.stats(StatsParams(now=31.0))}
    assert rows["a"].usage == rows["b"].usage > 0
    assert (rows["a"].ready, rows["a"].running, rows["a"].failed) == (1, 0, 1)
