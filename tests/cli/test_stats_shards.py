"""``fairq stats`` on a sharded queue: each shard's load side by side, and a tenant's shards."""

from __future__ import annotations

import json

from cli_store import Store

from fairq.app import App
from fairq.policy.shards import tenant_shards


def sharded(store: Store) -> App:
    """An App on the test's store with ``imports`` in 8 shards of 2 (as tests.worker.shard_app)."""
    app = App(store.url)
    app.queue("imports", shards=8, shard_size=2)
    app.job(name="work", queue="imports", tenant="tenant")(lambda tenant, n: None)
    return app


def test_the_shards_of_a_queue_side_by_side(store: Store) -> None:
    app = sharded(store)
    ids = [app.jobs["work"].enqueue("acme", n) for n in range(4)]
    ids.append(app.jobs["work"].enqueue("globex", 9))
    used = {app.job_info(i).queue for i in ids}  # type: ignore[union-attr]
    app.close()
    store.enqueue("acme")  # the demo queue: not sharded, not shown among shards
    doc = json.loads(store.run("stats", "--queue", "imports", "--json").stdout)
    assert {q["queue"] for q in doc["queues"]} == used
    (view,) = doc["shards"]
    assert view["queue"] == "imports"
    assert sum(row["ready"] for row in view["shards"]) == 5
    assert [row["index"] for row in view["shards"]] == sorted(
        row["index"] for row in view["shards"]
    )
    assert {row["shard"] for row in view["shards"]} == {q["queue"] for q in doc["queues"]}
    table = store.run("stats").stdout
    assert "shards of imports" in table


def test_a_tenants_shards_with_the_app(store: Store) -> None:
    app = sharded(store)
    for n in range(4):
        app.jobs["work"].enqueue("acme", n)
    app.close()
    args = (
        "stats",
        "--queue",
        "imports",
        "--tenant",
        "acme",
        "--app",
        "tests.worker.shard_app:app",
    )
    doc = json.loads(store.run(*args, "--json").stdout)
    (view,) = doc["shards"]
    assigned = [f"imports@{i}" for i in tenant_shards("imports", "acme", 8, 2)]
    assert view["assigned"] == assigned
    assert {row["shard"]: row["tenant_ready"] for row in view["shards"]} == dict.fromkeys(
        assigned, 2
    )
    table = store.run(*args).stdout
    assert f"'s shards: {', '.join(assigned)}" in table
    assert "its ready" in table
