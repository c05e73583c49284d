"""URLs and connections: options, a password never shown, unreachable servers named clearly."""

from __future__ import annotations

import socket

import psycopg
import pytest

from fairq.backends import open_backend
from fairq.backends.postgres import PostgresBackend
from fairq.backends.postgres.url import parse_url, redact
from fairq.contract import EnqueueParams, GetJobsParams
from fairq.errors import ConfigError, StoreUnavailable

from ._store import DisposableBackend, fresh_schema, server_url
from .helpers import new_job


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_named_without_its_password() -> None:
    port = closed_port()
    url = f"postgresql://fairq:s3cr3t-pw@127.0.0.1:{port}/db?password=other-s3cr3t&schema=x"
    with pytest.raises(StoreUnavailable) as raised:
        PostgresBackend(url)
    message = str(raised.value)
    assert f"127.0.0.1:{port}/db" in message
    assert "cannot reach" in message
    assert "s3cr3t" not in message


def test_fairq_options_are_taken_out_of_the_url_and_the_rest_go_to_libpq() -> None:
    url = parse_url("postgres://u:pw@h:5433/d?schema=jobs&migrate=false&sslmode=disable")
    assert (url.schema, url.migrate) == ("jobs", False)
    assert url.conninfo == "postgresql://u:pw@h:5433/d?sslmode=disable"
    assert url.display == "postgresql://u:***@h:5433/d?sslmode=disable"
    assert parse_url("postgresql://h/d", schema="other").schema == "other"
    assert redact("postgresql://u@h/d?password=x") == "postgresql://u@h/d?password=%2A%2A%2A"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h/d?schema=bad-name",
        "postgresql://h/d?schema=1abc",
        "postgresql://h/d?migrate=maybe",
        "postgresql://h/d?pool_size=0",
        "postgresql://h/d?pool_size=²",
        "postgresql://h/d?pool_size=١٢",
    ],
)
def test_bad_options_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        parse_url(url)


def test_open_backend_knows_both_schemes() -> None:
    schema = fresh_schema()
    for scheme in ("postgresql", "postgres"):
        url = server_url().replace("postgresql", scheme, 1) + f"?schema={schema}"
        backend = open_backend(url)
        assert isinstance(backend, PostgresBackend) and backend.schema == schema
        backend.close()
    DisposableBackend(server_url(), schema=schema).close()  # drops the schema


def test_statements_never_depend_on_the_search_path(pg: DisposableBackend) -> None:
    """Everything is schema-qualified: a connection whose search_path is elsewhere works."""
    with psycopg.connect(server_url(), options="-c search_path=pg_catalog") as conn:
        pg.enqueue_in(conn, EnqueueParams(jobs=[new_job(0)], now=0.0))
    assert [job.id for job in pg.get_jobs(GetJobsParams(ids=["j0"]))] == ["j0"]
