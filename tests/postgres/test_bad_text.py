"""A value PostgreSQL cannot store (a NUL character in a text) is a clear fairq error, not a
driver traceback, and nothing of the call is stored."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from fairq.backends.postgres import InvalidText
from fairq.contract import DequeueParams, EnqueueParams, FailParams, GetJobsParams
from fairq.errors import FairqError
from fairq.job import JobState

from ._store import CALLER_CLOCK, DisposableBackend, server_url
from .helpers import Q, new_job


def test_a_nul_in_a_text_is_refused_with_a_clear_error(pg: DisposableBackend) -> None:
    with pytest.raises(InvalidText, match=r"nothing was stored.*NUL character"):
        pg.enqueue(EnqueueParams(jobs=[dataclasses.replace(new_job(0), id="j\x000")], now=0.0))
    pg.enqueue(EnqueueParams(jobs=[new_job(1)], now=0.0))
    (lease,) = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=1.0)).leases
    with pytest.raises(InvalidText, match="NUL"):
        pg.fail(FailParams(token=lease.token, error="boom\x00", retry_at=None, now=2.0))
    assert [job.state for job in pg.get_jobs(GetJobsParams(ids=["j1"]))] == [JobState.RUNNING]


def test_a_nul_in_a_transactional_enqueue_leaves_the_callers_transaction_usable(
    pg: DisposableBackend,
) -> None:
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn, conn.transaction():
        with pytest.raises(FairqError, match="NUL"):  # InvalidText (or InvalidTenant)
            bad = dataclasses.replace(new_job(0), tenant="a\x00b")
            pg.enqueue_in(conn, EnqueueParams(jobs=[bad], now=0.0))
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(1)], now=0.0))
    assert [
        lease.job_id
        for lease in pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=1.0)).leases
    ] == ["j1"]
