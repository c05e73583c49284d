"""``fairq enqueue``: by name, with JSON arguments, and every way to get it wrong."""

from __future__ import annotations

import json

import pytest
from cli_store import Store

from fairq.demo.jobs import NOOP, NOOP_ASYNC, WORK
from fairq.job import JobState


def test_enqueue_by_published_name_prints_the_job_id(store: Store) -> None:
    result = store.run("enqueue", WORK, '["acme", 0.0]')
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    info = store.app.job_info(job_id)
    assert info is not None
    assert info.tenant == "acme"  # found through the published tenant argument
    assert info.queue == "demo"
    assert json.loads(info.payload) == {"args": ["acme", 0.0], "kwargs": {}}
    assert "store: sqlite:///" in result.stderr


def test_options_override_tenant_queue_delay_and_priority(store: Store) -> None:
    result = store.run(
        "enqueue", WORK, "--kwargs", '{"customer": "acme", "seconds": 0}',
        "--tenant", "other", "--queue", "later", "--delay", "3600", "--priority", "5",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    info = store.app.job_info(result.stdout.strip())
    assert info is not None
    assert (info.tenant, info.queue, info.priority) == ("other", "later", 5)
    assert info.state is JobState.SCHEDULED
    assert info.run_at - info.enqueued_at == pytest.approx(3600, abs=1)


def test_app_option_uses_its_declarations(store: Store) -> None:
    result = store.run("enqueue", NOOP, "--tenant", "acme", "--app", "fairq.demo.jobs:app")
    assert result.exit_code == 0, result.output
    info = store.app.job_info(result.stdout.strip())
    assert info is not None
    assert (info.name, info.tenant, info.queue) == (NOOP, "acme", "bench")


BAD_INPUTS = [
    (["enqueue", WORK, "[acme"], "ARGS_JSON is not valid JSON"),
    (["enqueue", WORK, '{"a": 1}'], "ARGS_JSON must be a JSON array"),
    (["enqueue", WORK, "[]", "--kwargs", "nope"], "--kwargs is not valid JSON"),
    (["enqueue", WORK, "[]", "--kwargs", "[1]"], "--kwargs must be a JSON object"),
    (["enqueue", WORK, "[NaN, 1]", "--tenant", "a"], "positional argument 0"),
    (
        ["enqueue", "no.such.job", "[]", "--tenant", "a"],
        f"known jobs: {NOOP}, {NOOP_ASYNC}, {WORK}",
    ),
    (["enqueue", NOOP], "has no tenant"),
    (["enqueue", NOOP, "--tenant", ""], "tenant"),
    (["enqueue", NOOP, "--tenant", "a", "--queue", "bad queue!"], "queue name"),
    (["enqueue", NOOP, "--tenant", "a", "--delay", "-1"], "--delay"),
    (["enqueue", NOOP, "--tenant", "a", "--delay", "nan"], "--delay"),
    (["enqueue", NOOP, "--tenant", "a", "--priority", "x"], "priority"),
    (["enqueue", NOOP, "--tenant", "a", "--app", "nomodule_xyz:app"], "cannot import"),
    (["enqueue", NOOP, "--tenant", "a", "--app", "fairq.demo.jobs:WORK"], "not a fairq App"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS)
def test_bad_input_exits_2_with_a_clear_message_and_changes_nothing(
    store: Store, args: list[str], message: str
) -> None:
    before = store.snapshot()
    result = store.run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert store.snapshot() == before
