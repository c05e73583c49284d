"""``fairq cancel ID…``, and ``fairq job`` showing a cancel request and a kept result."""

from __future__ import annotations

import json

from cli_store import Store

from fairq.contract import AckManyParams, DequeueParams
from fairq.job import JobState
from fairq.results import JobResult


def take(store: Store, queue: str) -> str:
    now = store.app.clock()
    (lease,) = store.app.backend.dequeue(
        DequeueParams(queues=[queue], worker_id="test", now=now)
    ).leases
    return lease.token


def test_cancel_says_what_it_did_to_each_job(store: Store) -> None:
    waiting = store.enqueue("acme")[0]
    running = store.enqueue("acme", queue="busy")[0]
    take(store, "busy")
    dead = store.make_dead("acme")
    result = store.run("cancel", waiting, running, dead, waiting)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"cancelled {waiting} (it was ready: it will not run)" in out
    assert f"asked {running} to stop" in out
    assert f"left {dead} as it is: it already ended (dead)" in out
    assert out.count(waiting) == 1  # each job once
    assert store.app.job_info(waiting).state is JobState.CANCELLED  # type: ignore[union-attr]
    shown = store.run("job", running)
    assert "requested: it ends cancelled" in shown.stdout
    (row,) = json.loads(store.run("job", running, "--json").stdout)
    assert (row["state"], row["cancel_requested"]) == ("running", True)


def test_cancel_json_and_an_unknown_id_changing_nothing(store: Store) -> None:
    job_id = store.enqueue("acme")[0]
    before = store.snapshot()
    missing = store.run("cancel", job_id, "nope")
    assert missing.exit_code == 2
    assert "no job with id 'nope'; nothing was cancelled" in missing.output
    assert store.snapshot() == before
    assert store.app.job_info(job_id).state is JobState.READY  # type: ignore[union-attr]
    done = json.loads(store.run("cancel", job_id, "--json").stdout)
    assert done == [{"id": job_id, "outcome": "cancelled"}]
    again = json.loads(store.run("cancel", job_id, "--json").stdout)
    assert again == [{"id": job_id, "outcome": "finished"}]


def test_job_shows_a_kept_result(store: Store) -> None:
    job_id = store.enqueue("acme", queue="answers")[0]
    token = take(store, "answers")
    value = {"rows": 12, "file": "s3://bucket/report-é.csv"}
    result = JobResult(value=json.dumps(value, ensure_ascii=False), keep=3600.0)
    store.app.backend.ack_many(
        AckManyParams(tokens=[token], now=store.app.clock(), results={token: result})
    )
    shown = store.run("job", job_id)
    assert shown.exit_code == 0, shown.output
    assert '"file": "s3://bucket/report-é.csv"' in shown.stdout
    assert "result kept until" in shown.stdout
    (row,) = json.loads(store.run("job", job_id, "--json").stdout)
    assert row["result"] == value
