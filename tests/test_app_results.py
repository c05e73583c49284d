"""The App's side of cancels and results: declaring ``result_ttl``, ``cancel``, ``result``
and its clear errors, and ``fairq.current_job()`` outside a job. The worker's side runs in
real processes (tests/worker/test_cancel_and_results.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

import fairq
from fairq import App, CancelOutcome
from fairq.contract import AckManyParams, DequeueParams, FailParams
from fairq.errors import ConfigError, JobFailed, NoResult, ResultTimeout

NOW = 1_000_000.0


@pytest.fixture
def app() -> App:
    app = App("memory://", clock=lambda: NOW)

    @app.job(name="plain", tenant="tenant")
    def plain(tenant: str) -> None:
        pass

    @app.job(name="kept", tenant="tenant", result_ttl=timedelta(minutes=5))
    def kept(tenant: str) -> int:
        return 1

    return app


def take(app: App) -> str:
    (lease,) = app.backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=NOW)).leases
    return lease.token


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "1h", timedelta(0), True])
def test_a_bad_result_ttl_is_refused_at_declaration(bad: object) -> None:
    app = App("memory://")
    with pytest.raises(ConfigError, match="result_ttl"):

        @app.job(result_ttl=bad)  # type: ignore[arg-type]
        def job() -> None:
            pass


def test_an_iterative_job_refuses_result_ttl_and_unknown_settings() -> None:
    """docs/results.md: iterative jobs keep no result; a setting they would drop unseen is
    refused at declaration, naming the way out."""
    app = App("memory://")

    def count(cursor: int | None, account: str) -> Iterator[int]:
        yield 1

    with pytest.raises(ConfigError, match="takes no result_ttl: it keeps no result"):
        app.iterative_job(tenant="account", result_ttl=60)(count)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="takes no setting max_atempts"):
        app.iterative_job(tenant="account", max_atempts=2)(count)  # type: ignore[call-arg]
    assert app.jobs == {}


def test_result_ttl_is_kept_as_seconds(app: App) -> None:
    assert app.jobs["kept"].result_ttl == 300.0
    assert app.jobs["plain"].result_ttl is None


def test_result_of_an_unknown_job_says_so(app: App) -> None:
    with pytest.raises(NoResult, match="no job with id 'nope'"):
        app.result("nope")


def test_result_times_out_clearly_and_the_job_is_untouched(app: App) -> None:
    job_id = app.jobs["kept"].enqueue("a")
    with pytest.raises(ResultTimeout, match=f"job {job_id} has not finished after 0 s"):
        app.result(job_id, timeout=0)
    with pytest.raises(ConfigError, match="timeout"):
        app.result(job_id, timeout=-1)
    assert app.job_info(job_id).state is fairq.JobState.READY  # type: ignore[union-attr]


def test_result_of_a_job_that_keeps_none_says_how_to_keep_it(app: App) -> None:
    job_id = app.jobs["plain"].enqueue("a")
    app.backend.ack_many(AckManyParams(tokens=[take(app)], now=NOW))
    with pytest.raises(NoResult, match=r"keeps no result: declare it with @app.job\(result_ttl"):
        app.result(job_id, timeout=0)


def test_result_of_a_dead_or_cancelled_job_raises_with_its_error(app: App) -> None:
    dead = app.jobs["kept"].enqueue("a")
    app.backend.fail(FailParams(token=take(app), now=NOW, error="KeyError: 'x'", retry_at=None))
    with pytest.raises(JobFailed, match="is dead and will give no result; its last error: Key"):
        app.result(dead)
    cancelled = app.jobs["kept"].enqueue("a")
    assert app.cancel(cancelled) is CancelOutcome.CANCELLED
    with pytest.raises(JobFailed, match="is cancelled") as found:
        app.result(cancelled)
    assert found.value.info.id == cancelled


def test_cancel_takes_job_ids_only(app: App) -> None:
    with pytest.raises(ConfigError, match="a job id is a non-empty str"):
        app.cancel(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="for one, use cancel"):
        app.cancel_many("abc")
    assert app.cancel_many([]) == []


def test_current_job_outside_a_job_says_where_it_works() -> None:
    with pytest.raises(fairq.NoCurrentJob, match="only available inside a job run by a fairq"):
        fairq.current_job()
