"""No hot-path statement scans tenants, jobs or the inbox: every one reads through an index.

The store is filled with enough rows in every state (and ANALYZEd) that the planner's choice
means something; each named block on the enqueue/dequeue/ack/maintenance paths is EXPLAINed
with realistic parameters and its plan searched for a sequential scan of a big table.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from fairq.backends.postgres.keys import channel_salt, queue_channel, schema_seed
from fairq.backends.postgres.producing import arguments as enqueue_arguments
from fairq.backends.postgres.records import tenant_key
from fairq.backends.postgres.throttling import window_key
from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    QueueSettings,
    SetQueueParams,
)
from fairq.job import NewJob
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle

from ._store import CALLER_CLOCK, DisposableBackend, open_disposable, server_url

BIG_TABLES = {
    "tenants", "jobs", "succeeded_jobs", "inbox", "throttle_windows", "slots", "figures",
    "unique_keys",
}  # fmt: skip
TENANTS = 2_000
JOBS_PER_TENANT = 10


RULES = (Throttle(1, 60.0, "slow"),)


def new_job(job_id: str, tenant: str) -> NewJob:
    return NewJob(
        id=job_id, name="task", queue="default", tenant=tenant, payload="{}", run_at=0.0,
        max_attempts=1, lease_timeout=30.0, cost=1.0,
    )  # fmt: skip


def _job(n: int, tenant: str, run_at: float = 0.0, *, throttled: bool = False) -> NewJob:
    return NewJob(
        id=f"j{n}", name="task", queue="default", tenant=tenant, payload="{}",
        priority=n % 3, run_at=run_at, max_attempts=1, lease_timeout=30.0, cost=1.0,
        throttle=RULES if throttled else (),
    )  # fmt: skip


@pytest.fixture(scope="module")
def filled() -> Iterator[DisposableBackend]:
    backend = open_disposable()
    # a rate every tenant is over after one start: dispatch leaves many in tenants_limited
    settings = QueueSettings(queue="default", rate=Rate(1, 1000.0))
    backend.set_queue(SetQueueParams(settings=settings, now=0.0))
    n = 0
    for start in range(0, TENANTS, 200):
        jobs = []
        for t in range(start, start + 200):
            for k in range(JOBS_PER_TENANT):
                run_at = 0.0 if k < 8 else 500.0 + n
                jobs.append(_job(n, f"tenant-{t}", run_at, throttled=k == 0))
                n += 1
        backend.enqueue(EnqueueParams(jobs=jobs, now=1.0))
    leases = backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=2.0, limit=600)
    ).leases
    for lease in leases[:300]:
        backend.ack_many(AckManyParams(tokens=[lease.token], now=3.0))
    for lease in leases[300:400]:
        backend.fail(FailParams(token=lease.token, now=3.0, error="x", retry_at=None))
    finish_many(backend, 5_000)
    parked = [
        NewJob(id=f"p{i}", name="task", queue="parked", tenant=f"t{i % 50}", payload="{}",
               run_at=0.0, max_attempts=1, lease_timeout=30.0, cost=1.0)
        for i in range(5_000)
    ]  # fmt: skip
    with psycopg.connect(
        server_url(), **CALLER_CLOCK
    ) as conn:  # waits in the inbox: no dequeue of "parked"
        backend.enqueue_in(conn, EnqueueParams(jobs=parked, now=1.0))
    with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as conn:
        fill_slots(conn, backend.schema)
        fill_figures(conn, backend.schema)
        fill_unique_keys(conn, backend.schema)
        for table in (
            "queues",
            "tenants",
            "jobs",
            "succeeded_jobs",
            "inbox",
            "throttle_windows",
            "slots",
            "figures",
            "unique_keys",
        ):
            conn.execute(f'ANALYZE "{backend.schema}".{table}')
    yield backend
    backend.close()


def fill_slots(conn: psycopg.Connection[Any], schema: str) -> None:
    """Tenant slots held by every tenant, three each, some expired (deadline 5 + i % 3)."""
    conn.execute(
        f"""INSERT INTO "{schema}".slots (nonce, queue, tenant, tenant_key, holder, lease, deadline)
            SELECT md5(i::text), 'default', 'tenant-' || (i / 3),
                   sha256(convert_to('tenant-' || (i / 3), 'UTF8')), 'w', 30.0, 5.0 + i %% 3
            FROM generate_series(0, %(count)s - 1) AS i""",
        {"count": TENANTS * 3},
    )


def fill_figures(conn: psycopg.Connection[Any], schema: str) -> None:
    """Figures of every tenant over a window of slots (0 .. 9), a few buckets each."""
    conn.execute(
        f"""INSERT INTO "{schema}".figures (slot, tenant_id, kind, bucket, count)
            SELECT s, t, k, b, 1 FROM generate_series(0, 9) AS s,
                   generate_series(1, %(tenants)s) AS t, unnest(ARRAY['w', 'r']) AS k,
                   generate_series(0, 3) AS b
            ON CONFLICT DO NOTHING""",
        {"tenants": TENANTS},
    )


def fill_unique_keys(conn: psycopg.Connection[Any], schema: str) -> None:
    """A unique key per job stored (ready, running, dead or succeeded: j0 …), half of them
    with ended windows; digests as unique_claim computes them (functions/unique.sql)."""
    conn.execute(
        f"""INSERT INTO "{schema}".unique_keys
                (digest, queue, tenant, key, job_id, job_queue, expires_at, hold)
            SELECT sha256(convert_to('7:default1:tk' || i, 'UTF8')), 'default', 't', 'k' || i,
                   'j' || i, 'default', 5.0 + i %% 2 * 100.0, false
            FROM generate_series(0, %(count)s - 1) AS i""",
        {"count": TENANTS * JOBS_PER_TENANT},
    )


def finish_many(backend: DisposableBackend, count: int) -> None:
    """Succeeded jobs kept for the retention (in their own queue, so "default" is unchanged)."""
    done = [
        NewJob(id=f"s{i}", name="task", queue="history", tenant=f"t{i % 50}", payload="{}",
               run_at=0.0, max_attempts=1, lease_timeout=30.0, cost=1.0)
        for i in range(count)
    ]  # fmt: skip
    backend.enqueue(EnqueueParams(jobs=done, now=1.0))
    params = DequeueParams(queues=["history"], worker_id="w", now=2.0, limit=count)
    tokens = [lease.token for lease in backend.dequeue(params).leases]
    assert len(backend.ack_many(AckManyParams(tokens=tokens, now=3.0)).acked) == count


def samples(backend: DisposableBackend) -> dict[str, dict[str, Any]]:
    schema = backend.schema
    locks = {"names": ["default"], "seed": schema_seed(schema), "now": 10.0}
    tenant = "tenant-7"
    one = {"queues": ["default"], "tenants": [tenant], "keys": [tenant_key(tenant)]}
    save = {
        "id": 8, "own_weight": None, "own_max_running": None, "weight": 1.0, "max_running": None,
        "finish_tag": 1.0, "start_tag": 1.0, "ready": 3, "scheduled": 1, "running": 1,
        "was_running": 1, "succeeded": 0, "failed": 0, "dead": 0, "own_rate_count": None,
        "own_rate_period": None, "own_rate_burst": None, "rate_count": 1,
        "rate_period": 1000.0, "rate_burst": 1, "tat": 1002.0, "limited_until": 1002.0,
        "usage": 1.0, "usage_at": 2.0,
    }  # fmt: skip
    saved_job = {
        "seq": 77, "state": "running", "attempts": 1, "run_at": 0.0, "ready_at": 1.0,
        "started_at": 5.0, "deadline": 35.0, "finished_at": None, "last_error": None,
        "worker_id": "w", "charged": 1.0, "claimed": True,
    }  # fmt: skip
    windows = {"keys": [window_key("task", tenant)], "names": ["task"], "tenants": [tenant]}
    return {
        "lock_queues_exclusive": locks,
        "lock_queues_shared": locks,
        "event_time": {"now": 10.0},
        "lock_ack_dequeue": {"queues": ["default"], "ids": ["j70", "j71"], "seed": locks["seed"]},
        "queue_ensure": {"name": "default"},
        "queue_get": {"name": "default"},
        "queues_dispatch_state": {"names": ["default"], "now": 10.0},
        "queue_set_vclock": {"name": "default", "vclock": 3.0},
        "queue_end_runs": {"name": "default", "ended": 1},
        "tenants_ensure": one,
        "shard_loads": {"queues": ["default", "other"], "tenant": tenant, "key": one["keys"][0],
                        "most": 100},
        "tenants_lock": one,
        "tenant_lock_by_id": {"id": 8},
        "tenant_save": save,
        "job_lock_by_id": {"id": "j70"},
        "job_queue": {"id": "j70"},
        "jobs_by_ids": {"ids": ["j70", "j71"]},
        "succeeded_ids": {"ids": ["j70", "j71"]},
        "job_save": saved_job,
        "job_checkpoint": {"seq": 77, "progress": '{"cursor":1,"items":1,"slices":0}'},
        "jobs_due_scheduled": {"queue": "default", "now": 600.0},
        "jobs_overdue_running": {"queue": "default", "now": 10.0},
        "jobs_queues": {"ids": ["j70", "j71"]},
        "jobs_lock_by_ids": {"ids": ["j70", "j71"]},
        "tenants_limited_due": {"queue": "default", "now": 1000.0},
        "throttle_windows_ensure": windows,
        "throttle_windows_lock": windows,
        "throttle_window_save": {
            "key": window_key("task", tenant),
            "times": [1.0, 5.0],
            "span": 60.0,
            "last_at": 5.0,
        },
        "throttle_windows_get": {"keys": windows["keys"]},
        "throttle_windows_prune": {"now": 50.0, "limit": 1000},
        "next_due": {"queue": "default"},
        "jobs_prune": {"before": 2.5, "now": 10.0},
        "results_keep": {"ids": ["s1", "s2"], "values": ["1", "2"], "keeps": [60.0, 60.0]},
        "cancel_queues": {"ids": ["j70", "p1"]},
        "inbox_cancel": {"ids": ["j70", "p1"]},
        "job_request_cancel": {"seq": 77, "now": 10.0},
        "job_finish_cancelled": {
            "seq": 77, "attempts": 1, "started_at": 5.0, "finished_at": 10.0, "last_error": "x",
        },
        "inbox_job_cancelled": {
            "id": "new", "name": "task", "payload": "{}", "priority": 0, "max_attempts": 1,
            "enqueued_at": 5.0, "run_at": 5.0, "headers": None,
            "seq": 10**9, "tenant_id": 8, "finished_at": 10.0, "last_error": "x",
        },
        "tenant_count_cancelled": {"id": 8, "n": 1},
        "tenants_unkeep": {"ids": [8, 9], "counts": [1, 2]},
        "tenants_forget": {"ids": [8, 9]},
        "inbox_by_ids": {"ids": ["j70"]},
        "notify": {"channel": queue_channel(schema, "default")},
        "slots_lock": {"keys": [-5, 7], "now": 10.0},
        "slot_acquire": {
            "queue": "default", "tenant": tenant, "key": tenant_key(tenant), "now": 6.0,
            "limit": None, "nonce": "n", "holder": "w", "lease": 30.0,
        },
        "slots_get": {"nonces": ["a", "b"]},
        "slots_renew": {"nonces": ["a", "b"], "deadlines": [40.0, 41.0]},
        "slots_delete": {"nonces": ["a", "b"]},
        "slots_prune": {"now": 6.0, "limit": 1000},
        "waiter_get": {"place": "p", "queue": "default", "tenant": tenant},
        "waiter_park": {
            "place": "p", "queue": "default", "tenant": tenant, "key": tenant_key(tenant),
            "now": 6.0, "park": "job",
        },
        "waiter_delete": {"place": "p"},
        "waiter_leave": {"place": "p", "queue": "default", "tenant": tenant},
        "waiter_wake": {
            "queue": "default", "tenant": tenant, "key": tenant_key(tenant), "now": 6.0,
        },
        "waiters_prune": {"before": 6.0},
        "figures_add": {"now": 10.0, "tenants": [8, 8], "kinds": ["r", "o"], "buckets": [3, 1]},
        "figures_prune": {"first": 0},  # as most maintains: nothing has left the window
        "unique_claim": {
            "queues": ["default"], "tenants": [tenant], "keys": ["k"], "ids": ["j70"],
            "job_queues": ["default"], "windows": [60.0], "holds": [False], "now": 10.0,
        },
        "unique_prune": {"now": 10.0, "limit": 1000},
        "job_costs_learn": {"queues": ["default"], "names": ["task"], "samples": [0.5]},
    }  # fmt: skip


def scans(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    yield plan["Node Type"], plan.get("Relation Name", "")
    for child in plan.get("Plans", []):
        yield from scans(child)


def explain(backend: DisposableBackend, name: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        conn.execute("SET plan_cache_mode = force_custom_plan")
        row = conn.execute("EXPLAIN (FORMAT JSON) " + backend.q[name], params).fetchone()
        conn.rollback()
    assert row is not None
    data = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return list(scans(data[0]["Plan"]))


def test_every_hot_path_query_is_checked(filled: DisposableBackend) -> None:
    # checked by the auto_explain test below
    functions = {"dequeue", "dispatch", "ack_many", "ack_and_dequeue", "enqueue", "take_in"}
    inspection = functions | {
        "tenants_stats", "tenants_of_queue", "jobs_dead", "queue_names",
        "queue_set_defaults", "inbox_queues", "job_types_upsert", "job_types_all",
        "figures_read", "job_costs",
    }  # fmt: skip
    assert set(filled.q) - inspection == set(samples(filled))


def test_no_hot_path_query_scans_a_big_table(filled: DisposableBackend) -> None:
    bad = {}
    for name, params in samples(filled).items():
        nodes = explain(filled, name, params)
        scanned = [rel for node, rel in nodes if node == "Seq Scan" and rel in BIG_TABLES]
        if scanned:
            bad[name] = nodes
    assert bad == {}, json.dumps(bad, indent=1)


def nested_plans(backend: DisposableBackend, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Plans of every statement the server-side functions run, from auto_explain."""
    plans: list[Any] = []
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        conn.add_notice_handler(
            lambda diag: plans.append(diag.message_primary) if diag.message_primary else None
        )
        for setting in (
            "LOAD 'auto_explain'",
            "SET auto_explain.log_min_duration = 0",
            "SET auto_explain.log_nested_statements = on",
            "SET auto_explain.log_format = 'json'",
            "SET client_min_messages = 'log'",
        ):
            conn.execute(setting)
        for name, params in calls:
            conn.execute(backend.q[name], params).fetchall()
        conn.rollback()
    found = []
    for message in plans:
        text = message.split("plan:", 1)[-1].strip()
        if text.startswith("{"):
            found.append(json.loads(text))
    return found


def test_the_server_side_dequeue_and_ack_read_only_indexes(filled: DisposableBackend) -> None:
    schema = filled.schema
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        rows = conn.execute(
            f"SELECT id, leases FROM \"{schema}\".jobs WHERE state = 'running' LIMIT 5"
        ).fetchall()
    assert len(rows) == 5
    seed = schema_seed(schema)
    dequeue = {
        "queues": ["default"],
        "seed": seed,
        "worker": "w",
        "limit": 3,
        "wait": False,
        "hold": None,
    }
    acks = {
        "ids": [r[0] for r in rows[3:]],
        "leases": [r[1] for r in rows[3:]],
        "ack_now": 3.0,
        "salt": channel_salt(schema),
    }
    calls = [
        ("dequeue", {**dequeue, "now": 2.0}),  # nothing due: dispatches
        ("dequeue", {**dequeue, "now": 600.0}),  # due: only the check
        ("ack_many", {"ids": [r[0] for r in rows[0:3]], "leases": [r[1] for r in rows[0:3]],
                      "now": 3.0, "seed": seed, "salt": channel_salt(schema)}),
        ("ack_and_dequeue", {**dequeue, **acks, "now": 3.0}),  # acks and dispatches
        ("ack_and_dequeue", {**dequeue, **acks, "now": 600.0}),  # due: locks and the check
        ("dequeue", {**dequeue, "now": 2.0, "wait": True}),  # a dequeue made again
        ("enqueue", enqueue_arguments([new_job("e1", "tenant-7")], 5.0, schema=schema)),
        ("enqueue", enqueue_arguments([new_job("e2", "tenant-7")], 5.0, schema=schema,
                                      inbox=True)),
        ("enqueue", enqueue_arguments([new_job("e3", "tenant-7")], 5.0, schema=schema)),
        ("take_in", {"queue": "parked", "now": 10.0}),
    ]  # fmt: skip
    plans = nested_plans(filled, calls)
    statements = [plan["Query Text"] for plan in plans]
    assert any("bool_or(u.exclusive)" in text for text in statements)  # ack_and_dequeue's locks
    assert any("ORDER BY e.start_tag, e.head_seq" in text for text in statements)
    assert any("INSERT INTO" in text and ".inbox" in text for text in statements)
    assert any("DELETE FROM" in text and ".inbox" in text for text in statements)
    # ack_held's move of its jobs into succeeded_jobs
    assert any("INSERT INTO" in text and ".succeeded_jobs" in text for text in statements)
    # ack_many's jobs found by id and locked in seq order (its queues held shared), then moved
    assert any("ORDER BY y.seq) o" in text for text in statements)
    assert any("DELETE FROM" in text for text in statements)
    # ack_held's update (succeeded_runs' rows), and dispatch's of its round's tenants (the acks'
    # rows among them)
    assert any("d.queue <> ALL(p_defer)" in text for text in statements)
    assert any("FROM unnest(p_cands) WITH ORDINALITY AS d" in text for text in statements)
    assert any("t.limited_until IS NOT NULL" in text for text in statements)
    bad = [
        (plan["Query Text"], list(scans(plan["Plan"])))
        for plan in plans
        if any(node == "Seq Scan" and rel in BIG_TABLES for node, rel in scans(plan["Plan"]))
    ]
    assert bad == [], json.dumps(bad, indent=1)
    picks = [plan for plan in plans if "ORDER BY e.start_tag, e.head_seq" in plan["Query Text"]]
    assert all(("Index Scan", "tenants") in list(scans(plan["Plan"])) for plan in picks)


def test_the_server_side_unique_claim_reads_only_indexes(filled: DisposableBackend) -> None:
    """Every path of unique_claim: a new key (inserted), a key held by a pending job (locked,
    judged), one whose job succeeded (taken over); then maintenance's prune."""
    schema = filled.schema
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        row = conn.execute(
            f'SELECT id FROM "{schema}".succeeded_jobs WHERE id LIKE %s LIMIT 1', ["j%"]
        ).fetchone()
    assert row is not None
    done = int(row[0][1:])
    keys = [(f"k{n}", "default") for n in (1, done)]  # j1 is pending
    claim = {
        "queues": ["default"] * 3, "tenants": ["t"] * 3, "keys": ["new", *[k for k, _ in keys]],
        "ids": ["x1", "x2", "x3"], "job_queues": ["default"] * 3, "windows": [60.0] * 3,
        "holds": [False] * 3, "now": 10.0,
    }  # fmt: skip
    plans = nested_plans(
        filled, [("unique_claim", claim), ("unique_prune", {"now": 50.0, "limit": 1000})]
    )
    statements = [plan["Query Text"] for plan in plans]
    assert any("FOR UPDATE" in text and "unique_keys" in text for text in statements)
    assert any(text.lstrip().startswith("UPDATE") for text in statements)
    assert any("SKIP LOCKED" in text for text in statements)
    bad = [
        (plan["Query Text"], list(scans(plan["Plan"])))
        for plan in plans
        if any(node == "Seq Scan" and rel in BIG_TABLES for node, rel in scans(plan["Plan"]))
    ]
    assert bad == [], json.dumps(bad, indent=1)
