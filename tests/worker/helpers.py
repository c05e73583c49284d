"""Waiting on conditions (never on time) and small views of a store, for the worker tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fairq import App, JobInfo, JobState
from fairq.job import NewJob

T = TypeVar("T")
DEADLINE = 30.0  # only so a broken worker fails a test instead of hanging it


def wait_for(condition: Callable[[], T], what: str, timeout: float = DEADLINE) -> T:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` at the end."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def job(app: App, job_id: str) -> JobInfo:
    info = app.job_info(job_id)
    assert info is not None, f"job {job_id} is not in the store"
    return info


def wait_state(app: App, job_id: str, state: JobState) -> JobInfo:
    def reached() -> JobInfo | None:
        info = job(app, job_id)
        return info if info.state is state else None

    found = wait_for(reached, f"job {job_id} to be {state}")
    assert found is not None
    return found


def marks(workdir: Path, kind: str) -> dict[str, int]:
    """The tags of ``workdir/kind/*`` and the process id each holds."""
    folder = workdir / kind
    if not folder.exists():
        return {}
    found = {}
    for path in folder.iterdir():
        text = path.read_text()
        if text:
            found[path.name] = int(text)
    return found


def go(workdir: Path, tag: str) -> None:
    """Let the ``block`` job tagged ``tag`` finish."""
    (workdir / "go").mkdir(exist_ok=True)
    (workdir / "go" / tag).touch()


def new_job(
    job_id: str,
    *,
    name: str = "task",
    payload: str = "{}",
    run_at: float = 0.0,
    lease_timeout: float = 30.0,
) -> NewJob:
    """A job of tenant "t1" on the default queue, for tests that enqueue straight to a store."""
    return NewJob(
        id=job_id, name=name, queue="default", tenant="t1", payload=payload, run_at=run_at,
        max_attempts=3, lease_timeout=lease_timeout, cost=1.0,
    )  # fmt: skip
