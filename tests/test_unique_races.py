"""Unique keys under concurrent enqueues: of the enqueues racing with one key, exactly one
stores its job and every other gets that job's id, on every store with several connections
(SQLite: one connection per thread, on one file; Redis and PostgreSQL: their pools)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fairq.contract import AckManyParams, Backend, DequeueParams, EnqueueParams, GetJobsParams
from fairq.job import NewJob, Unique

THREADS = 6
ROUNDS = 15


def _sqlite(tmp: Path) -> tuple[Callable[[], Backend], list[Backend]]:
    from fairq.backends.clock import Clock
    from fairq.backends.sqlite import SQLiteBackend

    opened: list[Backend] = []

    def make() -> Backend:
        backend = SQLiteBackend(tmp / "q.db", clock=Clock.CALLER)
        opened.append(backend)
        return backend

    return make, opened


def _redis(tmp: Path) -> tuple[Callable[[], Backend], list[Backend]]:
    from fairq.backends.redis import RedisBackend

    url = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    shared = RedisBackend.from_url(f"{url}?prefix=r{uuid.uuid4().hex[:8]}&clock=caller")
    return (lambda: shared), [shared]


def _postgres(tmp: Path) -> tuple[Callable[[], Backend], list[Backend]]:
    from postgres._store import open_disposable

    shared = open_disposable(clock="caller")
    return (lambda: shared), [shared]


STORES = {"sqlite": _sqlite, "redis": _redis, "postgres": _postgres}


@pytest.fixture(params=list(STORES))
def handles(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Backend]]:
    make, opened = STORES[request.param](tmp_path)
    yield make
    for backend in opened:
        backend.close()


def keyed(job_id: str, key: str) -> NewJob:
    return NewJob(
        id=job_id, name="task", queue="default", tenant="a", payload="{}", run_at=0.0,
        max_attempts=1, lease_timeout=600.0, cost=1.0, unique=Unique(key=key, window=600.0),
    )  # fmt: skip


def race(
    make: Callable[[], Backend],
    enqueue: Callable[[Backend, int, int], str],
    before: Callable[[], None] | None = None,
) -> list[set[str]]:
    """Every thread calls ``enqueue(backend, thread, round)`` at each round, all released at
    once (after ``before()``, when given, has run); the ids each round answered."""
    answers: list[list[str]] = [[] for _ in range(ROUNDS)]
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS, action=before)
    guard = threading.Lock()
    backends = [make() for _ in range(THREADS)]

    def run(thread: int) -> None:
        try:
            for n in range(ROUNDS):
                start.wait()
                got = enqueue(backends[thread], thread, n)
                with guard:
                    answers[n].append(got)
        except BaseException as exc:
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return [set(found) for found in answers]


def answer(backend: Backend, job: NewJob, now: float = 0.0) -> str:
    result = backend.enqueue(EnqueueParams(jobs=[job], now=now))
    return result.existing.get(0, job.id)


def test_exactly_one_of_racing_enqueues_stores_its_job(handles: Callable[[], Backend]) -> None:
    rounds = race(handles, lambda b, t, n: answer(b, keyed(f"r{n}-t{t}", f"key{n}")))
    assert all(len(ids) == 1 for ids in rounds), rounds
    backend = handles()
    every = [f"r{n}-t{t}" for n in range(ROUNDS) for t in range(THREADS)]
    stored = [info.id for info in backend.get_jobs(GetJobsParams(ids=every))]
    assert sorted(stored) == sorted(ids.pop() for ids in rounds)


def test_a_key_freed_by_an_ack_is_taken_by_exactly_one(handles: Callable[[], Backend]) -> None:
    """Before each round the job holding the one key succeeds: of the racing enqueues, exactly
    one takes the key over, and the others get its job."""
    backend = handles()
    backend.enqueue(EnqueueParams(jobs=[keyed("first", "k")], now=0.0))

    def finish_the_holder() -> None:
        (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=1.0)).leases
        assert backend.ack_many(AckManyParams(tokens=[lease.token], now=1.0)).acked

    rounds = race(
        handles, lambda b, t, n: answer(b, keyed(f"r{n}-t{t}", "k"), now=2.0), finish_the_holder
    )
    assert all(len(ids) == 1 for ids in rounds), rounds
    assert len(set().union(*rounds)) == ROUNDS
