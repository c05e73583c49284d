"""``Backend.history``: a queue's recorded jobs, paged, read without changing anything
(fairq/recorded.py). What a replay (fairq/sim/replay.py) reads: each job's arrival, tenant,
name, priority and its last run's start and end, whatever state it is in."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fairq.contract import (
    Backend,
    FailParams,
    HistoryParams,
    MaintainParams,
    RecordedJob,
    StatsParams,
)
from fairq.errors import ConfigError
from fairq.job import JobState

from .helpers import Q, ack, enqueue, new_job, take, take_one


def read_all(
    backend: Backend, *, since: float = 0.0, until: float = 1e6, limit: int = 2, queue: str = Q
) -> tuple[dict[str, RecordedJob], int]:
    """Every page from the first cursor to the last; the last copy of each job, and how many
    pages it took."""
    found: dict[str, RecordedJob] = {}
    cursor: str | None = None
    pages = 0
    while True:
        page = backend.history(
            HistoryParams(queue=queue, since=since, until=until, cursor=cursor, limit=limit)
        )
        pages += 1
        assert pages < 1000, "the cursor never reached the end"
        found.update((job.id, job) for job in page.jobs)
        if page.cursor is None:
            return found, pages
        cursor = page.cursor


def test_every_state_is_read_with_its_times(backend: Backend) -> None:
    enqueue(backend, [new_job(1, "a", name="export"), new_job(2, "b")], now=10.0)
    enqueue(backend, [new_job(3, "a"), new_job(4, "b", priority=5)], now=11.0)
    enqueue(backend, [new_job(5, "a", run_at=500.0), new_job(6, "c")], now=12.0)
    first = take_one(backend, now=20.0)
    assert first.job_id == "j1"
    ack(backend, first, now=23.5)
    second = take_one(backend, now=24.0)
    third = take_one(backend, now=25.0)
    backend.fail(FailParams(token=third.token, now=26.0, error="boom", retry_at=None))

    found, _ = read_all(backend)

    assert set(found) == {"j1", "j2", "j3", "j4", "j5", "j6"}
    done = found["j1"]
    assert (done.tenant, done.name, done.state) == ("a", "export", JobState.SUCCEEDED)
    assert (done.enqueued_at, done.started_at, done.finished_at) == (10.0, 20.0, 23.5)
    assert done.attempts == 1
    running = found[second.job_id]
    assert running.state is JobState.RUNNING
    assert (running.started_at, running.finished_at) == (24.0, None)
    failed = found[third.job_id]
    assert failed.state is JobState.DEAD
    assert (failed.started_at, failed.finished_at) == (25.0, 26.0)
    assert found["j4"].priority == 5 and found["j2"].priority == 0
    scheduled = found["j5"]
    assert scheduled.state is JobState.SCHEDULED
    assert (scheduled.enqueued_at, scheduled.run_at, scheduled.started_at) == (12.0, 500.0, None)
    for waiting in set(found) - {"j1", "j5", second.job_id, third.job_id}:
        assert found[waiting].state is JobState.READY
        assert found[waiting].started_at is None
    assert found["j6"].tenant == "c"


def test_the_window_is_of_enqueue_times_and_of_one_queue(backend: Backend) -> None:
    for n, at in enumerate((0.0, 5.0, 9.999, 10.0, 15.0), start=1):
        enqueue(backend, [new_job(n, "a")], now=at)
    enqueue(backend, [new_job(9, "a", queue="other")], now=6.0)

    found, _ = read_all(backend, since=5.0, until=15.0)

    assert set(found) == {"j2", "j3", "j4"}
    other, _ = read_all(backend, queue="other")
    assert set(other) == {"j9"}
    nothing, pages = read_all(backend, queue="never-used")
    assert nothing == {} and pages == 1


@pytest.mark.parametrize("limit", [1, 3, 1000])
def test_pages_cover_every_job_once_it_is_read_through(backend: Backend, limit: int) -> None:
    enqueue(backend, [new_job(n, f"t{n % 4}") for n in range(40)], now=1.0)
    for lease in take(backend, now=2.0, limit=15):
        ack(backend, lease, now=3.0)

    found, pages = read_all(backend, limit=limit)

    assert set(found) == {f"j{n}" for n in range(40)}
    assert sum(job.state is JobState.SUCCEEDED for job in found.values()) == 15
    assert pages >= 1


def test_a_job_that_moves_during_the_read_is_not_lost(backend: Backend) -> None:
    """Between two pages every job is handed out and acked: each is still read, at least once,
    and a job read after its ack is read succeeded."""
    enqueue(backend, [new_job(n, "a") for n in range(12)], now=1.0)
    page = backend.history(HistoryParams(queue=Q, since=0.0, until=10.0, limit=3))
    seen = {job.id for job in page.jobs}
    for lease in take(backend, now=2.0, limit=12):
        ack(backend, lease, now=3.0)
    cursor = page.cursor
    while cursor is not None:
        page = backend.history(HistoryParams(queue=Q, since=0.0, until=10.0, cursor=cursor))
        seen |= {job.id for job in page.jobs}
        assert all(job.state is JobState.SUCCEEDED for job in page.jobs)
        cursor = page.cursor
    assert seen == {f"j{n}" for n in range(12)}


def test_reading_changes_nothing(make_backend: Callable[[], Backend]) -> None:
    """Two stores given the same work; one is read through in between: both then hand out the
    same jobs in the same order and report the same stats."""
    read, untouched = make_backend(), make_backend()
    for store in (read, untouched):
        enqueue(store, [new_job(n, f"t{n % 3}") for n in range(9)], now=1.0)
        ack(store, take_one(store, now=2.0), now=4.0)
    read_all(read)
    order = [
        [lease.job_id for lease in take(store, now=5.0, limit=8)] for store in (read, untouched)
    ]
    assert order[0] == order[1]
    assert read.stats(StatsParams(queue=Q, now=6.0)) == untouched.stats(
        StatsParams(queue=Q, now=6.0)
    )


def test_a_pruned_job_is_gone_from_the_history(backend: Backend) -> None:
    enqueue(backend, [new_job(1, "a"), new_job(2, "a")], now=1.0)
    ack(backend, take_one(backend, now=2.0), now=3.0)
    backend.maintain(MaintainParams(now=100.0, retention=10.0))

    found, _ = read_all(backend)

    assert set(found) == {"j2"}


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"since": 5.0, "until": 5.0}, "before until"),
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "at most"),
        ({"queue": "no spaces"}, "queue"),
    ],
)
def test_bad_params_are_refused_before_any_store(
    options: dict[str, object], complaint: str
) -> None:
    given: dict[str, object] = {"queue": Q, "since": 0.0, "until": 1.0, **options}
    with pytest.raises(ConfigError, match=complaint):
        HistoryParams(**given)  # type: ignore[arg-type]
