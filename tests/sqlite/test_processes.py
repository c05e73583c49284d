"""Two OS processes dequeuing from one file never get the same job, and together get them all."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import EnqueueParams, StatsParams
from tests.sqlite.helpers import new_job

WORKER = Path(__file__).with_name("dequeue_worker.py")
JOBS = 2000


@pytest.mark.processes
def test_two_processes_share_the_work_without_overlap(db_path: Path) -> None:
    backend = SQLiteBackend(db_path)
    jobs = [new_job(f"j{i}", f"t{i % 37}", lease=300.0) for i in range(JOBS)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))

    with ExitStack() as stack:
        workers = [stack.enter_context(_start_worker(db_path, i)) for i in range(2)]
        outputs = _run_together(workers)
    assert [worker.returncode for worker in workers] == [0, 0]

    first, second = (json.loads(out) for out in outputs)
    assert len(first) == len(set(first)) and len(second) == len(set(second))
    assert not set(first) & set(second)
    assert set(first) | set(second) == {job.id for job in jobs}
    assert first and second  # each held a lease while the other dequeued (dequeue_worker.py)

    rows = backend.stats(StatsParams())
    assert sum(r.succeeded for r in rows) == JOBS
    assert sum(r.ready + r.running for r in rows) == 0
    backend.close()


def _start_worker(db_path: Path, index: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(db_path), str(index)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _run_together(workers: list[subprocess.Popen[str]]) -> list[str]:
    """Wait until every worker has its store open, then start them all at once."""
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.close()
    outputs = []
    for worker in workers:
        assert worker.stdout is not None
        outputs.append(worker.stdout.read())
        worker.wait(timeout=120)
    return outputs
