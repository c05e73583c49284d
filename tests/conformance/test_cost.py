"""Fair in worker-seconds: the real run time replaces the estimate charged at dispatch."""

from __future__ import annotations

from fairq.contract import Backend

from .helpers import ack, enqueue, new_jobs, take_one

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


def test_an_expired_lease_charges_its_tenant_the_whole_lease(backend: Backend) -> None:
    """A worker that dies holding a job costs its tenant the lease time, like a slow run."""
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
    assert 0.09 <= jobs["crashy"] / jobs["fine"] <= 0.11, jobs
