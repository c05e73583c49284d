"""``fairq dead list`` and ``fairq dead requeue``."""

from __future__ import annotations

import json

import pytest
from cli_store import Store

from fairq.job import JobState


def test_list_shows_dead_jobs(store: Store) -> None:
    job_id = store.make_dead("acme", error="ValueError: bad row 7\nTraceback...")
    result = store.run("dead", "list")
    assert result.exit_code == 0, result.output
    assert job_id in result.stdout
    assert "acme" in result.stdout
    assert "ValueError: bad row 7" in result.stdout
    assert "1/3" in result.stdout
    (row,) = json.loads(store.run("dead", "list", "--json").stdout)
    assert (row["id"], row["tenant"], row["state"]) == (job_id, "acme", "dead")
    assert row["last_error"].startswith("ValueError")


def test_list_filters_and_empty(store: Store) -> None:
    assert "No dead jobs" in store.run("dead", "list").stdout
    store.make_dead("acme")
    store.make_dead("globex")
    doc = json.loads(store.run("dead", "list", "--tenant", "globex", "--json").stdout)
    assert [r["tenant"] for r in doc] == ["globex"]
    assert len(json.loads(store.run("dead", "list", "--limit", "1", "--json").stdout)) == 1


def test_requeue_by_id(store: Store) -> None:
    first = store.make_dead("acme")
    second = store.make_dead("globex")
    result = store.run("dead", "requeue", first)
    assert result.exit_code == 0, result.output
    assert "requeued 1 job" in result.stdout
    info = store.app.job_info(first)
    assert info is not None and info.state is JobState.READY and info.attempts == 0
    still = store.app.job_info(second)
    assert still is not None and still.state is JobState.DEAD


def test_requeue_all_of_a_queue(store: Store) -> None:
    ids = [store.make_dead("acme", queue="q1"), store.make_dead("globex", queue="q1")]
    other = store.make_dead("acme", queue="q2")
    result = store.run("dead", "requeue", "--all", "--queue", "q1")
    assert result.exit_code == 0, result.output
    assert "requeued 2 jobs" in result.stdout
    states = [store.app.job_info(i).state for i in ids]  # type: ignore[union-attr]
    assert states == [JobState.READY, JobState.READY]
    assert store.app.job_info(other).state is JobState.DEAD  # type: ignore[union-attr]


def test_requeue_of_a_live_job_is_skipped_with_a_note(store: Store) -> None:
    live = store.enqueue("acme")[0]
    result = store.run("dead", "requeue", live)
    assert result.exit_code == 0
    assert "not dead" in result.stderr
    assert "requeued 0 jobs" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["dead", "requeue"],
        ["dead", "requeue", "deadbeef"],  # unknown id
        ["dead", "requeue", "--all", "{dead}"],
        ["dead", "requeue", "{dead}", "--queue", "graveyard"],
        ["dead", "list", "--limit", "0"],
    ],
)
def test_bad_requeue_exits_2_and_changes_nothing(store: Store, args: list[str]) -> None:
    dead_id = store.make_dead("acme")
    args = [a.replace("{dead}", dead_id) for a in args]
    if args == ["dead", "requeue", "deadbeef"]:
        args.insert(2, dead_id)  # one good id and one typo: still nothing changes
    before = store.snapshot()
    result = store.run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert store.snapshot() == before
