"""The schema: migrations equal schema.sql, and a schema fairq cannot use is refused clearly."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from click.testing import CliRunner

from fairq.backends.postgres import PermissionDenied, PostgresBackend
from fairq.backends.postgres.migrate import migrate
from fairq.backends.postgres.sql import fill_schema, latest_version, migrations, schema_snapshot
from fairq.backends.postgres.url import parse_url
from fairq.cli import cli
from fairq.cli import migrate as _registers_migrate  # noqa: F401
from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    GetQueueParams,
    ListDeadParams,
    MaintainParams,
    QueueSettings,
    StatsParams,
)
from fairq.errors import DuplicateJob, SchemaError
from fairq.job import NewJob

from ._store import drop_schema, fresh_schema, server_url, with_user

CATALOG = """
SELECT 'column' AS kind, c.relname || '.' || a.attname AS name,
       format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text || ' '
       || coalesce(co.collname, '') || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
       || ' #' || a.attnum AS definition
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 100
WHERE n.nspname = %(schema)s AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'S')
UNION ALL
SELECT 'index', c.relname, pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'constraint', t.relname || '.' || con.conname, pg_get_constraintdef(con.oid)
FROM pg_constraint con JOIN pg_class t ON t.oid = con.conrelid
JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'relation', c.relname, c.relkind::text || ' ' || c.relpersistence::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'function', p.proname, pg_get_functiondef(p.oid)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(schema)s
ORDER BY 1, 2, 3
"""


@pytest.fixture
def schema() -> Iterator[str]:
    name = fresh_schema()
    yield name
    drop_schema(name)


def catalog(schema: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(server_url()) as conn:
        rows = conn.execute(CATALOG, {"schema": schema}).fetchall()
    return [(kind, name, text.replace(schema, "<schema>")) for kind, name, text in rows]


def stored_at_version(schema: str, version: int, rows: str = "") -> None:
    """A schema migrated only up to ``version``, holding ``rows`` (SQL) as that version stored
    them: the state a newer fairq finds and must upgrade."""
    with psycopg.connect(server_url(), autocommit=True) as conn, conn.transaction():
        for migration in migrations()[:version]:
            conn.execute(fill_schema(migration.script, schema).encode())
            conn.execute(
                f'INSERT INTO "{schema}".fairq_migrations VALUES (%s, %s)',
                (migration.version, migration.name),
            )
        if rows:
            conn.execute(fill_schema(rows, schema).encode())


def test_applying_every_migration_in_order_gives_schema_sql(schema: str) -> None:
    migrated = migrate(parse_url(server_url(), schema=schema))
    assert migrated == list(range(1, latest_version() + 1))
    snapshot = fresh_schema()
    try:
        with psycopg.connect(server_url(), autocommit=True) as conn:
            conn.execute(fill_schema(schema_snapshot(), snapshot).encode())
        assert catalog(schema) == catalog(snapshot)
        assert len(catalog(schema)) > 50  # the dump really covers the schema
    finally:
        drop_schema(snapshot)


def test_migrate_is_idempotent_and_records_each_version(schema: str) -> None:
    url = parse_url(server_url(), schema=schema)
    migrate(url)
    assert migrate(url) == []
    with psycopg.connect(server_url()) as conn:
        versions = conn.execute(f'SELECT version, name FROM "{schema}".fairq_migrations').fetchall()
    assert versions == [(m.version, m.name) for m in migrations()]


def test_the_cli_migrates_a_named_schema(schema: str) -> None:
    args = ["migrate", "--url", server_url(), "--schema", schema]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert f"now at version {latest_version()}" in first.output
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and "up to date" in again.output


def test_a_missing_schema_with_migrate_false_says_to_run_fairq_migrate(schema: str) -> None:
    with pytest.raises(SchemaError, match="fairq migrate") as raised:
        PostgresBackend(f"{server_url()}?migrate=false&schema={schema}")
    assert "has no fairq tables" in str(raised.value)


def test_a_too_old_schema_is_refused_without_migrate_and_upgraded_with_it(schema: str) -> None:
    stored_at_version(schema, 1)
    with pytest.raises(SchemaError, match=r"is at version 1.*fairq migrate"):
        PostgresBackend(server_url(), schema=schema, migrate=False)
    backend = PostgresBackend(server_url(), schema=schema)
    backend.close()
    with psycopg.connect(server_url()) as conn:
        top = conn.execute(f'SELECT max(version) FROM "{schema}".fairq_migrations').fetchone()
    assert top == (latest_version(),)


def test_a_schema_made_by_a_newer_fairq_is_refused(schema: str) -> None:
    migrate(parse_url(server_url(), schema=schema))
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f"INSERT INTO \"{schema}\".fairq_migrations VALUES (999, 'future')")
    for allowed in (True, False):
        with pytest.raises(SchemaError, match="version 999, made by a newer fairq"):
            PostgresBackend(server_url(), schema=schema, migrate=allowed)


@pytest.fixture
def weak_role() -> Iterator[str]:
    """A login role with no rights beyond connecting (trust auth: no password needed)."""
    role = f"fq_weak_{fresh_schema()[-8:]}"
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}")
    yield role
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_a_role_that_may_not_create_the_schema_gets_a_clear_error(
    schema: str, weak_role: str
) -> None:
    """A new role may not create schemas in the database (PUBLIC lacks CREATE by default)."""
    with pytest.raises(PermissionDenied, match=r"lacks a privilege.*fairq migrate"):
        PostgresBackend(with_user(server_url(), weak_role), schema=schema)


def test_a_role_without_rights_on_an_existing_schema_gets_a_clear_error(
    schema: str, weak_role: str
) -> None:
    migrate(parse_url(server_url(), schema=schema))
    url = with_user(server_url(), weak_role)
    with pytest.raises(PermissionDenied, match=f"GRANT USAGE ON SCHEMA {schema}"):
        PostgresBackend(url, schema=schema, migrate=False)
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {weak_role}')
        conn.execute(f'GRANT SELECT ON "{schema}".fairq_migrations TO {weak_role}')
    backend = PostgresBackend(url, schema=schema, migrate=False)  # opens: the version is readable
    try:
        with pytest.raises(PermissionDenied, match="lacks a privilege"):
            backend.get_queue(GetQueueParams(queue="default"))
    finally:
        backend.close()


def test_a_version_1_schema_holding_jobs_upgrades_with_its_jobs_intact(schema: str) -> None:
    """Jobs in every state survive the upgrade; a lease held across it still acks."""
    stored_at_version(schema, 1, V1_JOBS)
    backend = PostgresBackend(server_url(), schema=schema)
    try:
        jobs = {
            job.id: job
            for job in backend.get_jobs(GetJobsParams(ids=["r1", "r2", "run", "sch", "dead"]))
        }
        states = {job_id: job.state.value for job_id, job in jobs.items()}
        assert states == {
            "r1": "ready", "r2": "ready", "run": "running", "sch": "scheduled", "dead": "dead",
        }  # fmt: skip
        assert (jobs["run"].attempts, jobs["run"].deadline, jobs["dead"].last_error) == (
            2, 40.0, "boom",
        )  # fmt: skip
        (stats,) = backend.stats(StatsParams(queue="default", tenant="acme"))
        assert (stats.ready, stats.scheduled, stats.running, stats.dead) == (2, 1, 1, 1)
        assert (stats.rate, stats.limited_until, stats.usage) == (None, None, 0.0)
        backend.ack_many(AckManyParams(tokens=["run:2"], now=11.0))  # the token handed out before
        leases = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=12.0)).leases
        assert [(lease.job_id, lease.token) for lease in leases] == [("r1", "r1:1")]
        assert backend.get_queue(GetQueueParams(queue="default")) == QueueSettings(
            queue="default", max_running=5
        )
    finally:
        backend.close()


# One tenant with two ready jobs, one running (attempt 2, started at 10), one scheduled and one
# dead, written as the version-1 code wrote them: counters, start tag and head on the tenant.
V1_JOBS = """
INSERT INTO {schema}.queues (name, weight, max_running, vclock) VALUES ('default', 1.0, 5, 3.0);
INSERT INTO {schema}.tenants (id, queue, tenant, tenant_key, weight, max_running, finish_tag,
                              start_tag, head_seq, ready, scheduled, running, dead, failed)
VALUES (1, 'default', 'acme', sha256('acme'::bytea), 1.0, 5, 4.0, 4.0, 1, 2, 1, 1, 1, 2);
INSERT INTO {schema}.jobs (seq, id, tenant_id, queue, name, state, payload, priority, attempts,
                           max_attempts, lease_timeout, cost, enqueued_at, run_at, ready_at,
                           started_at, deadline, finished_at, last_error, worker_id)
VALUES
 (1, 'r1', 1, 'default', 'task', 'ready', '{}', 0, 0, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  NULL, NULL, NULL, NULL, NULL),
 (2, 'r2', 1, 'default', 'task', 'ready', '{}', 0, 0, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  NULL, NULL, NULL, NULL, NULL),
 (3, 'run', 1, 'default', 'task', 'running', '{}', 0, 2, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  10.0, 40.0, NULL, 'boom', 'w'),
 (4, 'sch', 1, 'default', 'task', 'scheduled', '{}', 0, 0, 3, 30.0, 1.0, 0.0, 500.0, NULL,
  NULL, NULL, NULL, NULL, NULL),
 (5, 'dead', 1, 'default', 'task', 'dead', '{}', 0, 3, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  5.0, NULL, 6.0, 'boom', 'w');
SELECT setval('{schema}.jobs_seq_seq', 5);
SELECT setval('{schema}.tenants_id_seq', 1);
"""


def test_version_7_counts_the_succeeded_jobs_already_stored(schema: str) -> None:
    """kept is backfilled: the tenant is forgotten when its last old succeeded job is pruned."""
    stored_at_version(schema, 6, V6_SUCCEEDED)
    backend = PostgresBackend(server_url(), schema=schema)
    try:
        assert backend.maintain(MaintainParams(now=30.0, retention=10.0)).pruned == 1
        (stats,) = backend.stats(StatsParams(queue="default", tenant="acme"))
        assert stats.succeeded == 2
        assert backend.maintain(MaintainParams(now=100.0, retention=10.0)).pruned == 1
        assert backend.stats(StatsParams(queue="default")) == []
    finally:
        backend.close()


# One tenant with two succeeded jobs, finished at 5 and at 50, as version 6 stored them.
V6_SUCCEEDED = """
INSERT INTO {schema}.queues (name) VALUES ('default');
INSERT INTO {schema}.tenants (id, queue, tenant, tenant_key, weight, succeeded)
VALUES (1, 'default', 'acme', sha256('acme'::bytea), 1.0, 2);
INSERT INTO {schema}.jobs (seq, id, tenant_id, queue, name, state, payload, priority, attempts,
                           max_attempts, lease_timeout, cost, enqueued_at, run_at, ready_at,
                           started_at, finished_at, worker_id)
VALUES
 (1, 's1', 1, 'default', 'task', 'succeeded', '{}', 0, 1, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  4.0, 5.0, 'w'),
 (2, 's2', 1, 'default', 'task', 'succeeded', '{}', 0, 1, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  49.0, 50.0, 'w');
SELECT setval('{schema}.jobs_seq_seq', 2);
SELECT setval('{schema}.tenants_id_seq', 1);
"""


def test_version_8_moves_succeeded_jobs_out_keeping_every_job(schema: str) -> None:
    """A schema-7 store with jobs in every state, succeeded ones kept: after the upgrade every
    job reads back as before, the lease held across it acks, a succeeded id is still taken,
    and the prune and idle-tenant forgetting count the moved jobs."""
    stored_at_version(schema, 7, V7_JOBS)
    backend = PostgresBackend(server_url(), schema=schema)
    try:
        ids = ["r1", "run", "sch", "dead", "s1", "s2"]
        before = {job.id: job for job in backend.get_jobs(GetJobsParams(ids=ids))}
        assert {i: job.state.value for i, job in before.items()} == {
            "r1": "ready", "run": "running", "sch": "scheduled", "dead": "dead",
            "s1": "succeeded", "s2": "succeeded",
        }  # fmt: skip
        s1 = before["s1"]
        assert (s1.queue, s1.tenant, s1.attempts, s1.started_at, s1.finished_at) == (
            "default", "acme", 2, 4.0, 5.0,
        )  # fmt: skip
        assert (s1.last_error, s1.payload, s1.deadline) == ("boom", '{"a": 1}', None)
        with psycopg.connect(server_url()) as conn:
            left = conn.execute(f'SELECT count(*) FROM "{schema}".jobs').fetchone()
        assert left == (4,)
        with pytest.raises(DuplicateJob):
            backend.enqueue(EnqueueParams(jobs=[_v7_job("s2")], now=20.0))
        backend.ack_many(AckManyParams(tokens=["run:1"], now=11.0))
        assert [job.state.value for job in backend.get_jobs(GetJobsParams(ids=["run"]))] == [
            "succeeded"
        ]
        assert [job.id for job in backend.list_dead(ListDeadParams())] == ["dead"]
        assert backend.maintain(MaintainParams(now=30.0, retention=10.0)).pruned == 2  # s1, run
        (stats,) = backend.stats(StatsParams(queue="default", tenant="acme"))
        assert (stats.ready, stats.scheduled, stats.running, stats.dead, stats.succeeded) == (
            1, 1, 0, 1, 3,
        )  # fmt: skip
        assert [job.id for job in backend.get_jobs(GetJobsParams(ids=ids))] == [
            "r1",
            "sch",
            "dead",
            "s2",
        ]
    finally:
        backend.close()


def _v7_job(job_id: str) -> NewJob:
    return NewJob(
        id=job_id, name="task", queue="default", tenant="acme", payload="{}", run_at=0.0,
        max_attempts=3, lease_timeout=30.0, cost=1.0,
    )  # fmt: skip


# One tenant with a ready, a running (lease 1, started at 10), a scheduled and a dead job, and
# two succeeded jobs (finished at 5 and 50, the first after a failed attempt), as version 7
# stored them.
V7_JOBS = """
INSERT INTO {schema}.queues (name, vclock) VALUES ('default', 3.0);
INSERT INTO {schema}.tenants (id, queue, tenant, tenant_key, weight, finish_tag, start_tag,
                              head_seq, ready, scheduled, running, succeeded, failed, dead, kept)
VALUES (1, 'default', 'acme', sha256('acme'::bytea), 1.0, 4.0, 4.0, 1, 1, 1, 1, 2, 2, 1, 2);
INSERT INTO {schema}.jobs (seq, id, tenant_id, queue, name, state, payload, priority, attempts,
                           max_attempts, lease_timeout, cost, enqueued_at, run_at, ready_at,
                           started_at, deadline, finished_at, last_error, worker_id, leases,
                           charged)
VALUES
 (1, 'r1', 1, 'default', 'task', 'ready', '{}', 0, 0, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  NULL, NULL, NULL, NULL, NULL, 0, 0.0),
 (2, 'run', 1, 'default', 'task', 'running', '{}', 0, 1, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  10.0, 40.0, NULL, NULL, 'w', 1, 1.0),
 (3, 'sch', 1, 'default', 'task', 'scheduled', '{}', 0, 0, 3, 30.0, 1.0, 0.0, 500.0, NULL,
  NULL, NULL, NULL, NULL, NULL, 0, 0.0),
 (4, 'dead', 1, 'default', 'task', 'dead', '{}', 0, 3, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  5.0, NULL, 6.0, 'boom', 'w', 3, 1.0),
 (5, 's1', 1, 'default', 'task', 'succeeded', '{"a": 1}', 0, 2, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  4.0, NULL, 5.0, 'boom', 'w', 2, 1.0),
 (6, 's2', 1, 'default', 'task', 'succeeded', '{}', 0, 1, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  49.0, NULL, 50.0, NULL, 'w', 1, 1.0);
SELECT setval('{schema}.jobs_seq_seq', 6);
SELECT setval('{schema}.tenants_id_seq', 1);
"""


def test_version_9_acks_and_dequeues_a_version_8_store_in_one_call(schema: str) -> None:
    """A schema-8 store with jobs in every state: after the upgrade, ack_and_dequeue of the
    lease held across it (with a due scheduled job: the slow path, then the fast one) does
    exactly what ack_many then dequeue does on the same store upgraded alike."""
    other = fresh_schema()
    stores = []
    try:
        for name in (schema, other):
            stored_at_version(name, 8, V8_JOBS)
            stores.append(PostgresBackend(server_url(), schema=name))
        together, apart = stores
        tokens = ["run:1", "s1:1", "nope"]
        answers = []
        for now, limit in [(20.0, 1), (21.0, 5)]:
            acks = AckManyParams(tokens=tokens, now=now)
            params = DequeueParams(queues=["default"], worker_id="w", now=now, limit=limit)
            both = together.ack_and_dequeue(AckAndDequeueParams(acks=acks, dequeue=params))
            result, leases = both.acks, list(both.dequeue.leases)
            assert (result, leases) == (apart.ack_many(acks), apart.dequeue(params).leases)
            answers.append((list(result.acked), [lease.token for lease in leases]))
            tokens = [lease.token for lease in leases]
        assert answers == [(["run:1"], ["r1:1"]), (["r1:1"], ["sch:1"])]
        ids = ["r1", "run", "sch", "dead", "s1"]
        assert together.get_jobs(GetJobsParams(ids=ids)) == apart.get_jobs(GetJobsParams(ids=ids))
        assert together.stats(StatsParams(now=22.0)) == apart.stats(StatsParams(now=22.0))
        (stats,) = together.stats(StatsParams(queue="default", tenant="acme"))
        assert (stats.ready, stats.scheduled, stats.running, stats.dead, stats.succeeded) == (
            0, 0, 1, 1, 3,
        )  # fmt: skip
    finally:
        for store in stores:
            store.close()
        drop_schema(other)


# One tenant with a ready, a running (lease 1, started at 10), a scheduled (due at 15) and a
# dead job, and one succeeded job, as version 8 stored them.
V8_JOBS = """
INSERT INTO {schema}.queues (name, vclock) VALUES ('default', 3.0);
INSERT INTO {schema}.tenants (id, queue, tenant, tenant_key, weight, finish_tag, start_tag,
                              head_seq, ready, scheduled, running, succeeded, failed, dead, kept)
VALUES (1, 'default', 'acme', sha256('acme'::bytea), 1.0, 4.0, 4.0, 1, 1, 1, 1, 1, 1, 1, 1);
INSERT INTO {schema}.jobs (seq, id, tenant_id, queue, name, state, payload, priority, attempts,
                           max_attempts, lease_timeout, cost, enqueued_at, run_at, ready_at,
                           started_at, deadline, finished_at, last_error, worker_id, leases,
                           charged)
VALUES
 (1, 'r1', 1, 'default', 'task', 'ready', '{}', 0, 0, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  NULL, NULL, NULL, NULL, NULL, 0, 0.0),
 (2, 'run', 1, 'default', 'task', 'running', '{}', 0, 1, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  10.0, 40.0, NULL, NULL, 'w', 1, 1.0),
 (3, 'sch', 1, 'default', 'task', 'scheduled', '{}', 0, 0, 3, 30.0, 1.0, 0.0, 15.0, NULL,
  NULL, NULL, NULL, NULL, NULL, 0, 0.0),
 (4, 'dead', 1, 'default', 'task', 'dead', '{}', 0, 3, 3, 30.0, 1.0, 0.0, 0.0, 0.0,
  5.0, NULL, 6.0, 'boom', 'w', 3, 1.0);
INSERT INTO {schema}.succeeded_jobs (id, seq, tenant_id, priority, attempts, max_attempts,
                                     enqueued_at, run_at, started_at, finished_at, name,
                                     payload, last_error)
VALUES ('s1', 5, 1, 0, 1, 3, 0.0, 0.0, 4.0, 5.0, 'task', '{}', NULL);
SELECT setval('{schema}.jobs_seq_seq', 5);
SELECT setval('{schema}.tenants_id_seq', 1);
"""
