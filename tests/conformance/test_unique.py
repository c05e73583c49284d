"""Unique keys (fairq/policy/unique.py): while a key is held, an enqueue with it stores
nothing and gets the id of the job holding it. A key holds within its window while its job is
scheduled, ready or running (retries included), or for its whole window when it is a hold key;
its scope is the queue as enqueued and the tenant. Batches decide job after job."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fairq.contract import (
    Backend,
    CancelOutcome,
    CancelParams,
    EnqueueParams,
    EnqueueResult,
    FailParams,
    GetJobsParams,
    MaintainParams,
)
from fairq.errors import ConfigError, DuplicateJob
from fairq.job import JobState, NewJob, Unique
from fairq.policy.throttle import Throttle

from .helpers import Q, ack, job, new_job, snapshot, stat, take, take_one

S0, S1 = "imports@0", "imports@1"
CANCELLED, REQUESTED = CancelOutcome.CANCELLED, CancelOutcome.REQUESTED


def keyed(
    n: int, key: str = "k", tenant: str = "a", *, window: float = 100.0, hold: bool = False,
    **options: object,
) -> NewJob:  # fmt: skip
    return replace(new_job(n, tenant, **options), unique=Unique(key=key, window=window, hold=hold))  # type: ignore[arg-type]


def put(backend: Backend, jobs: list[NewJob], now: float = 0.0) -> EnqueueResult:
    return backend.enqueue(EnqueueParams(jobs=jobs, now=now))


def stored(backend: Backend, *ids: str) -> list[str]:
    return [info.id for info in backend.get_jobs(GetJobsParams(ids=list(ids)))]


def test_a_second_enqueue_gets_the_first_jobs_id_and_stores_nothing(backend: Backend) -> None:
    assert put(backend, [keyed(1)]).existing == {}
    again = put(backend, [keyed(2)], now=1.0)
    assert (dict(again.existing), list(again.queues)) == ({0: "j1"}, [Q])
    assert stored(backend, "j1", "j2") == ["j1"]
    assert stat(backend, "a").ready == 1


@pytest.mark.parametrize("first_state", ["scheduled", "ready", "running"])
def test_the_key_holds_while_its_job_waits_or_runs(backend: Backend, first_state: str) -> None:
    put(backend, [keyed(1, run_at=50.0 if first_state == "scheduled" else 0.0)])
    if first_state == "running":
        take_one(backend, 1.0)
    assert job(backend, "j1").state.value == first_state
    assert put(backend, [keyed(2)], now=2.0).existing == {0: "j1"}


def test_a_new_job_is_stored_once_the_first_succeeded(backend: Backend) -> None:
    put(backend, [keyed(1)])
    ack(backend, take_one(backend, 1.0), 2.0)
    assert put(backend, [keyed(2)], now=3.0).existing == {}
    # the new job holds the key now
    assert put(backend, [keyed(3)], now=4.0).existing == {0: "j2"}
    assert stored(backend, "j1", "j2", "j3") == ["j1", "j2"]


def test_a_dead_job_holds_no_key(backend: Backend) -> None:
    put(backend, [keyed(1, max_attempts=1)])
    lease = take_one(backend, 1.0)
    params = FailParams(token=lease.token, now=2.0, error="boom", retry_at=None)
    assert backend.fail(params).state is JobState.DEAD
    assert put(backend, [keyed(2)], now=3.0).existing == {}


def test_a_cancelled_job_frees_its_key(backend: Backend) -> None:
    """Cancelled while waiting: at once. Asked to stop while running: once it stops."""
    put(backend, [keyed(1), keyed(2, "k2")])
    assert backend.cancel(CancelParams(ids=["j1"], now=1.0)).outcomes == [CANCELLED]
    assert put(backend, [keyed(3)], now=2.0).existing == {}
    lease = take_one(backend, 3.0)
    assert lease.job_id == "j2"
    assert backend.cancel(CancelParams(ids=["j2"], now=4.0)).outcomes == [REQUESTED]
    assert put(backend, [keyed(4, "k2")], now=5.0).existing == {0: "j2"}
    backend.fail(FailParams(token=lease.token, now=6.0, error="stopped", retry_at=7.0))
    assert job(backend, "j2").state is JobState.CANCELLED
    assert put(backend, [keyed(5, "k2")], now=8.0).existing == {}


def test_retries_keep_the_key(backend: Backend) -> None:
    put(backend, [keyed(1, max_attempts=3)])
    lease = take_one(backend, 1.0)
    backend.fail(FailParams(token=lease.token, now=2.0, error="boom", retry_at=10.0))
    assert job(backend, "j1").state is JobState.SCHEDULED
    assert put(backend, [keyed(2)], now=3.0).existing == {0: "j1"}
    take_one(backend, 10.0)  # the retry runs
    assert put(backend, [keyed(3)], now=11.0).existing == {0: "j1"}


def test_an_expired_lease_keeps_the_key(backend: Backend) -> None:
    put(backend, [keyed(1, lease=5.0)])
    take_one(backend, 1.0)
    backend.maintain(MaintainParams(now=7.0))
    assert job(backend, "j1").state is JobState.READY
    assert put(backend, [keyed(2)], now=8.0).existing == {0: "j1"}


def test_after_the_window_a_new_job_is_stored_though_the_first_still_waits(
    backend: Backend,
) -> None:
    put(backend, [keyed(1, window=10.0)])
    assert put(backend, [keyed(2, window=10.0)], now=9.9).existing == {0: "j1"}
    assert put(backend, [keyed(3, window=10.0)], now=10.0).existing == {}
    assert stat(backend, "a").ready == 2
    # the window runs from the enqueue that took the key
    assert put(backend, [keyed(4, window=10.0)], now=19.0).existing == {0: "j3"}


def test_maintenance_drops_ended_keys_and_live_ones_stay(backend: Backend) -> None:
    put(backend, [keyed(1, "short", window=5.0), keyed(2, "long", window=50.0)])
    backend.maintain(MaintainParams(now=6.0))
    assert put(backend, [keyed(3, "short"), keyed(4, "long")], now=7.0).existing == {1: "j2"}


def test_the_scope_is_the_queue_and_the_tenant(backend: Backend) -> None:
    put(backend, [keyed(1, tenant="a")])
    result = put(backend, [keyed(2, tenant="b"), keyed(3, tenant="a", queue="other")], now=1.0)
    assert result.existing == {}
    assert list(result.queues) == [Q, "other"]
    assert put(backend, [keyed(4, tenant="b")], now=2.0).existing == {0: "j2"}


def test_keys_are_exact_text(backend: Backend) -> None:
    keys = ["k", "K", "k ", "ключ:{x}", "a:b", "a" * 1024]
    result = put(backend, [keyed(n, key) for n, key in enumerate(keys)])
    assert result.existing == {}
    again = put(backend, [keyed(10 + n, key) for n, key in enumerate(keys)], now=1.0)
    assert again.existing == {n: f"j{n}" for n in range(len(keys))}


def test_a_batch_decides_job_after_job(backend: Backend) -> None:
    put(backend, [keyed(0, "old")])
    batch = [
        keyed(1, "k"), keyed(2, "k"), new_job(3), keyed(4, "other"), keyed(5, "old"),
        keyed(6, "k"), keyed(7, "k", tenant="b"),
    ]  # fmt: skip
    result = put(backend, batch, now=1.0)
    assert result.existing == {1: "j1", 4: "j0", 5: "j1"}
    assert list(result.queues) == [Q] * 7
    assert stored(backend, *(f"j{n}" for n in range(8))) == ["j0", "j1", "j3", "j4", "j7"]
    assert (stat(backend, "a").ready, stat(backend, "b").ready) == (4, 1)


def test_a_refused_batch_takes_no_key(backend: Backend) -> None:
    put(backend, [new_job(9)])
    before = snapshot(backend, ["j1", "j9"])
    with pytest.raises(DuplicateJob):
        put(backend, [keyed(1), new_job(9)], now=1.0)
    assert snapshot(backend, ["j1", "j9"]) == before
    assert put(backend, [keyed(2)], now=2.0).existing == {}


def test_a_job_whose_key_is_held_is_not_checked_for_its_id(backend: Backend) -> None:
    """A periodic job's id names its tick: a second enqueue of the tick repeats the id."""
    put(backend, [keyed(1)])
    assert put(backend, [keyed(1)], now=1.0).existing == {0: "j1"}


def test_a_hold_key_holds_for_its_whole_window(backend: Backend) -> None:
    put(backend, [keyed(1, hold=True, window=30.0)])
    ack(backend, take_one(backend, 1.0), 2.0)
    assert put(backend, [keyed(2, hold=True, window=30.0)], now=29.0).existing == {0: "j1"}
    assert put(backend, [keyed(3, hold=True, window=30.0)], now=30.0).existing == {}


def test_the_key_of_a_sharded_job_is_kept_in_the_queue_it_names(backend: Backend) -> None:
    """Its scope is the queue as enqueued (the tenant's first shard), not the shard chosen."""
    first = replace(keyed(1, queue=S0), shards=(S0, S1))
    put(backend, [replace(new_job(0, queue=S0), shards=(S0, S1)), first])
    assert [lease.queue for lease in take(backend, 1.0, 2, (S0, S1))] == [S0, S1]
    again = put(backend, [replace(keyed(2, queue=S0), shards=(S0, S1))], now=2.0)
    assert (dict(again.existing), list(again.queues)) == ({0: "j1"}, [S1])


def test_a_unique_job_takes_no_throttle_rules() -> None:
    with pytest.raises(ConfigError, match="takes no throttle rules"):
        replace(keyed(1), throttle=(Throttle(1, 60.0, "slow"),))


@pytest.mark.parametrize(
    ("key", "window", "problem"),
    [
        ("", 10.0, "must not be empty"),
        ("a" * 1025, 10.0, "over 1024"),
        ("a\x00b", 10.0, "NUL"),
        ("k", 0.0, "unique_for must be more than 0"),
        ("k", float("nan"), "unique_for must be more than 0"),
    ],
)
def test_bad_keys_and_windows_are_refused(key: str, window: float, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        Unique(key=key, window=window)
