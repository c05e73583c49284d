"""The schema: migrations equal schema.sql, and a schema fairq cannot use is refused clearly."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from click.testing import CliRunner

from fairq.backends.postgres import PermissionDenied, PostgresBackend, sql
from fairq.backends.postgres import migrate as migrate_module
from fairq.backends.postgres.migrate import migrate
from fairq.backends.postgres.sql import (
    FunctionFile,
    Migration,
    fill_schema,
    function_files,
    functions_digest,
    latest_version,
    migrations,
    schema_snapshot,
)
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
    JobCost,
    JobCostsParams,
    StatsParams,
)
from fairq.errors import SchemaError
from fairq.job import JobState, Lease, lease_token

from ._store import drop_schema, fresh_schema, server_url, with_option, with_user
from .helpers import new_job

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
    """Migrations and schema.sql hold DDL only; the functions come from functions/*.sql."""
    migrated = migrate(parse_url(server_url(), schema=schema))
    assert migrated == list(range(1, latest_version() + 1))
    snapshot = fresh_schema()
    try:
        with psycopg.connect(server_url(), autocommit=True) as conn:
            conn.execute(fill_schema(schema_snapshot(), snapshot).encode())
            for file in function_files():
                conn.execute(fill_schema(file.script, snapshot).encode())
        assert catalog(schema) == catalog(snapshot)
        assert "CREATE FUNCTION" not in schema_snapshot()
        assert not any("CREATE FUNCTION" in m.script for m in migrations())
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


@pytest.fixture
def next_migration(monkeypatch: pytest.MonkeyPatch) -> Migration:
    """A fairq one migration ahead of this one (the framework serves the migrations to come)."""
    ahead = Migration(
        len(migrations()) + 1, "next", "ALTER TABLE {schema}.queues ADD COLUMN note text;"
    )
    extended = (*migrations(), ahead)
    monkeypatch.setattr(sql, "migrations", lambda: extended)
    monkeypatch.setattr(migrate_module, "migrations", lambda: extended)
    return ahead


def test_a_too_old_schema_is_refused_without_migrate_and_upgraded_with_it(
    schema: str, next_migration: Migration
) -> None:
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
        conn.execute(f'GRANT SELECT ON "{schema}".fairq_functions TO {weak_role}')
    backend = PostgresBackend(url, schema=schema, migrate=False)  # opens: the versions readable
    try:
        with pytest.raises(PermissionDenied, match="lacks a privilege"):
            backend.get_queue(GetQueueParams(queue="default"))
    finally:
        backend.close()


def applied_functions(schema: str) -> dict[str, tuple[str, object]]:
    """Each function of the schema: its file's recorded sha256 is not enough, so the catalog's
    own identity (oid) and definition, by name."""
    with psycopg.connect(server_url()) as conn:
        rows = conn.execute(
            "SELECT p.proname, p.oid::text, pg_get_functiondef(p.oid) FROM pg_proc p"
            " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s",
            (schema,),
        ).fetchall()
    return {name: (oid, text) for name, oid, text in rows}


PROBE_2 = "\nCREATE FUNCTION {schema}.probe() RETURNS int LANGUAGE sql AS 'SELECT 2';\n"
PROBE_3 = "\nCREATE FUNCTION {schema}.probe() RETURNS text LANGUAGE sql AS 'SELECT 3::text';\n"


def with_probe(monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """This fairq's function files, decay.sql's text changed: it also defines probe()."""
    changed = tuple(
        FunctionFile(f.name, f.script + body) if f.name == "decay.sql" else f
        for f in function_files()
    )
    monkeypatch.setattr(migrate_module, "function_files", lambda: changed)


def test_a_changed_function_file_is_applied_on_the_next_open_and_only_that_one(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    PostgresBackend(server_url(), schema=schema).close()
    first = applied_functions(schema)
    PostgresBackend(server_url(), schema=schema).close()
    assert applied_functions(schema) == first  # unchanged text: nothing re-created

    with_probe(monkeypatch, PROBE_2)
    PostgresBackend(server_url(), schema=schema).close()
    second = applied_functions(schema)
    assert {name for name in second if second[name] != first.get(name)} == {
        "probe", "decayed", "decayed_product",
    }  # fmt: skip
    with psycopg.connect(server_url()) as conn:
        assert conn.execute(f'SELECT "{schema}".probe()').fetchone() == (2,)

    # a new result type: the file's functions are dropped before they are created again
    with_probe(monkeypatch, PROBE_3)
    with pytest.raises(SchemaError, match=r"functions older or newer.*decay\.sql"):
        PostgresBackend(server_url(), schema=schema, migrate=False)
    PostgresBackend(server_url(), schema=schema).close()
    with psycopg.connect(server_url()) as conn:
        assert conn.execute(f'SELECT "{schema}".probe()').fetchone() == ("3",)


def test_two_stores_opening_at_once_apply_changed_functions_once(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    PostgresBackend(server_url(), schema=schema).close()
    with_probe(monkeypatch, PROBE_2)
    start = threading.Barrier(2)
    opened: list[PostgresBackend] = []
    failed: list[BaseException] = []

    def open_store() -> None:
        start.wait()
        try:
            opened.append(PostgresBackend(server_url(), schema=schema))
        except BaseException as exc:  # reported below
            failed.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in opened:
        store.close()
    assert (failed, len(opened)) == ([], 2)
    with psycopg.connect(server_url()) as conn:
        assert conn.execute(f'SELECT "{schema}".probe()').fetchone() == (2,)


def test_the_function_files_digest_matches_their_release() -> None:
    """A change to functions/*.sql must bump sql.FUNCTIONS_RELEASE and set its digest, or an
    older fairq restarting mid-deploy could not tell its functions from the newer ones."""
    found = functions_digest(function_files())
    assert found == sql.FUNCTIONS_DIGEST, (
        f"functions/*.sql changed: set FUNCTIONS_RELEASE = {sql.FUNCTIONS_RELEASE + 1} and "
        f'FUNCTIONS_DIGEST = "{found}" in fairq/backends/postgres/sql.py'
    )


def test_functions_of_a_newer_release_are_never_replaced_by_older_ones(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer fairq re-created a file's functions (the next release); this older one (the
    current release, other text) refuses the schema instead of putting its own back, with or
    without migrate."""
    newer_release = sql.FUNCTIONS_RELEASE + 1
    monkeypatch.setattr(migrate_module, "FUNCTIONS_RELEASE", newer_release)
    with_probe(monkeypatch, PROBE_2)
    PostgresBackend(server_url(), schema=schema).close()
    newer = applied_functions(schema)
    monkeypatch.undo()
    for allowed in (True, False):
        with pytest.raises(
            SchemaError, match=f"functions of release {newer_release}, made by a newer fairq"
        ):
            PostgresBackend(server_url(), schema=schema, migrate=allowed)
    assert applied_functions(schema) == newer


#: What a fairq of schema version 10 stored: tenant a with a job running since t = 1 (its
#: lease until 61) and one ready, and tenant b's job waiting in the inbox (enqueued while a
#: transaction held b, or in a caller's transaction). Version 10 knew no learned cost, claims,
#: nor learn_cost.
AT_VERSION_10 = """
INSERT INTO {schema}.queues (name) VALUES ('default');
INSERT INTO {schema}.tenants (
    queue, tenant, tenant_key, weight, finish_tag, start_tag, head_seq, ready, running)
VALUES ('default', 'a', sha256(convert_to('a', 'UTF8')), 1.0, 1.0, 1.0, 2, 1, 1);
INSERT INTO {schema}.jobs (
    seq, id, tenant_id, queue, name, state, payload, priority, attempts, max_attempts,
    lease_timeout, cost, enqueued_at, run_at, ready_at, started_at, deadline, worker_id,
    leases, charged)
VALUES
    (1, 'old-running', 1, 'default', 'task', 'running', '{"args":[1],"kwargs":{}}', 0, 1, 3,
     60.0, 1.0, 0.0, 0.0, 0.0, 1.0, 61.0, 'w', 1, 1.0),
    (2, 'old-ready', 1, 'default', 'task', 'ready', '{"args":[2],"kwargs":{}}', 0, 0, 3,
     60.0, 1.0, 0.0, 0.0, 0.0, NULL, NULL, NULL, 0, 0.0);
SELECT setval('{schema}.jobs_seq_seq', 2);
INSERT INTO {schema}.inbox (
    id, queue, tenant, tenant_key, name, payload, priority, max_attempts, lease_timeout, cost,
    enqueued_at, run_at)
VALUES ('old-boxed', 'default', 'b', sha256(convert_to('b', 'UTF8')), 'task',
        '{"args":[3],"kwargs":{}}', 0, 3, 60.0, 1.0, 0.5, 0.0);
"""


def test_a_store_of_version_10_upgrades_in_place_and_its_jobs_run(schema: str) -> None:
    """Migration 11 (learned costs, claims) keeps what was stored: the running job is acked
    under its old lease and teaches its run time; the ready one and the inbox's run after."""
    stored_at_version(schema, 10, AT_VERSION_10)
    backend = PostgresBackend(with_option(server_url(), "clock", "caller"), schema=schema)
    try:
        by_tenant = {r.tenant: (r.ready, r.running) for r in backend.stats(StatsParams())}
        assert by_tenant == {"a": (1, 1), "b": (1, 0)}
        acked = backend.ack_many(AckManyParams(tokens=[lease_token("old-running", 1)], now=3.0))
        assert acked.acked == [lease_token("old-running", 1)]
        assert backend.job_costs(JobCostsParams()) == [
            JobCost(queue="default", name="task", runs=1, estimate=2.0)
        ]
        params = DequeueParams(queues=["default"], worker_id="w", now=4.0, limit=5)
        leases = backend.dequeue(params).leases
        assert sorted((lease.job_id, lease.cost, lease.deadline) for lease in leases) == [
            ("old-boxed", 2.0, 64.0),
            ("old-ready", 2.0, 64.0),
        ]
        tokens = [lease.token for lease in leases]
        assert backend.ack_many(AckManyParams(tokens=tokens, now=5.0)).acked == tokens
        ids = ["old-running", "old-ready", "old-boxed"]
        states = {job.id: job.state for job in backend.get_jobs(GetJobsParams(ids=ids))}
        assert states == dict.fromkeys(ids, JobState.SUCCEEDED)
        assert backend.job_costs(JobCostsParams())[0].runs == 3
    finally:
        backend.close()


def test_functions_replaced_while_a_worker_holds_leases_leave_its_runs_whole(schema: str) -> None:
    """A rolling deploy: a newer fairq re-creates every function (drop, create) while a worker
    of the release before holds a lease, its pooled connection open with its prepared
    statements (psycopg prepares a statement on its sixth run). That worker's ack and next
    dequeue go through the new functions: no lease is lost and no job runs twice."""
    url = with_option(server_url(), "clock", "caller")
    worker = PostgresBackend(url, schema=schema)

    def cycle(lease: Lease, now: float, limit: int) -> list[Lease]:
        both = worker.ack_and_dequeue(
            AckAndDequeueParams(
                acks=AckManyParams(tokens=[lease.token], now=now),
                dequeue=DequeueParams(queues=["default"], worker_id="old", now=now, limit=limit),
            )
        )
        assert both.acks.acked == [lease.token]
        return both.dequeue.leases

    try:
        worker.enqueue(EnqueueParams(jobs=[new_job(n) for n in range(10)], now=0.0))
        (held,) = worker.dequeue(DequeueParams(queues=["default"], worker_id="old", now=1.0)).leases
        ran = [held.job_id]
        for step in range(6):  # one lease out at a time; the statements prepared
            (held,) = cycle(held, 2.0 + step, 1)
            ran.append(held.job_id)
        first = applied_functions(schema)
        with psycopg.connect(server_url(), autocommit=True) as conn:  # the release before's
            conn.execute(
                f'UPDATE "{schema}".fairq_functions SET sha256 = %s, release = %s',
                ("of-the-release-before", sql.FUNCTIONS_RELEASE - 1),
            )
        PostgresBackend(url, schema=schema).close()  # the newer fairq starts: re-creates all
        again = applied_functions(schema)
        assert all(again[name][0] != first[name][0] for name in first)  # new oids, every one

        rest = cycle(held, 10.0, 5)
        ran += [lease.job_id for lease in rest]
        acked = worker.ack_many(AckManyParams(tokens=[lease.token for lease in rest], now=11.0))
        assert len(acked.acked) == len(rest) == 3
        assert sorted(ran) == sorted(f"j{n}" for n in range(10))
        ids = [f"j{n}" for n in range(10)]
        states = {job.id: job.state for job in worker.get_jobs(GetJobsParams(ids=ids))}
        assert states == dict.fromkeys(ids, JobState.SUCCEEDED)
    finally:
        worker.close()
