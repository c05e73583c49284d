"""Iterative jobs on real ``fairq worker`` processes (SQLite file): killed mid-slice, the job
resumes from its last checkpoint; stopped by SIGTERM, it checkpoints, hands back, and the
worker exits 0 long before its grace period ends. The job is ``count_up`` in apps.py:
checkpoints every 5 items, and item ``pause_at`` waits for ``go/pause``."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from fairq import JobState, Progress

from .conftest import Store
from .helpers import job, marks, wait_for

pytestmark = pytest.mark.processes

TOTAL = 30
PAUSE_AT = 12  # items 0-12 ran; the checkpoint after item 9 holds cursor 10


def items_run(store: Store) -> list[int]:
    return [int(line) for line in (store.workdir / "items.txt").read_text().split()]


def go(store: Store) -> None:
    (store.workdir / "go").mkdir(exist_ok=True)
    (store.workdir / "go" / "pause").touch()


def test_a_killed_worker_s_iteration_resumes_from_its_last_checkpoint(store: Store) -> None:
    job_id = store.app.jobs["count_up"].enqueue("t1", str(store.workdir), TOTAL, PAUSE_AT)
    first = store.worker()
    wait_for(lambda: str(PAUSE_AT) in marks(store.workdir, "paused"), "the pause")
    assert job(store.app, job_id).progress == Progress(cursor=10, items=10)
    first.process.kill()
    assert first.exit_code() == -signal.SIGKILL
    go(store)
    second = store.worker("--burst")  # waits for the 1 s lease to expire, then runs it
    assert second.exit_code() == 0
    info = job(store.app, job_id)
    assert (info.state, info.attempts) == (JobState.SUCCEEDED, 2)
    counts = Counter(items_run(store))
    assert set(counts) == set(range(TOTAL))
    # Only the items since the last checkpoint ran again, and only once more.
    assert {item for item, n in counts.items() if n > 1} == {10, 11, 12}
    assert max(counts.values()) == 2


def test_sigterm_checkpoints_hands_back_and_the_next_worker_resumes(store: Store) -> None:
    job_id = store.app.jobs["count_up"].enqueue("t1", str(store.workdir), TOTAL, PAUSE_AT)
    first = store.worker("--grace-period", "600")
    wait_for(lambda: str(PAUSE_AT) in marks(store.workdir, "paused"), "the pause")
    first.signal(signal.SIGTERM)
    first.wait_log("SIGTERM received")
    go(store)  # item 12 ends; at its cursor the job checkpoints and hands itself back
    assert first.exit_code() == 0  # not after the 600 s grace period (exit_code waits 30 s)
    info = job(store.app, job_id)
    assert (info.state, info.attempts) == (JobState.READY, 0)
    assert info.progress == Progress(cursor=PAUSE_AT + 1, items=PAUSE_AT + 1, slices=1)
    second = store.worker("--burst")
    assert second.exit_code() == 0
    assert job(store.app, job_id).state is JobState.SUCCEEDED
    assert sorted(items_run(store)) == list(range(TOTAL))  # none ran twice
