"""``fairq job ID…``: one job's fields, an iterative job's progress included."""

from __future__ import annotations

import json

from cli_store import Store

from fairq.contract import CheckpointParams, DequeueParams
from fairq.job import Progress


def test_job_shows_an_iterative_job_s_progress(store: Store) -> None:
    job_id = store.enqueue("acme", queue="exports")[0]
    now = store.app.clock()
    (lease,) = store.app.backend.dequeue(
        DequeueParams(queues=["exports"], worker_id="test", now=now)
    ).leases
    progress = Progress(cursor={"after": "row-9041"}, items=9041, slices=3)
    store.app.backend.checkpoint(
        CheckpointParams(token=lease.token, progress=progress.encode(), now=now)
    )
    result = store.run("job", job_id)
    assert result.exit_code == 0, result.output
    for shown in (job_id, "acme", "running", '{"after": "row-9041"}', "9041", "slices", "3"):
        assert shown in result.stdout
    (row,) = json.loads(store.run("job", job_id, "--json").stdout)
    assert row["progress"] == {"cursor": {"after": "row-9041"}, "items": 9041, "slices": 3}
    assert row["state"] == "running"


def test_job_without_progress_and_unknown_ids(store: Store) -> None:
    job_id = store.enqueue("acme")[0]
    result = store.run("job", job_id)
    assert result.exit_code == 0, result.output
    assert "ready" in result.stdout and "cursor" not in result.stdout
    assert json.loads(store.run("job", job_id, "--json").stdout)[0]["progress"] is None
    missing = store.run("job", job_id, "nope")
    assert missing.exit_code == 2
    assert "no job with id 'nope'" in missing.output
