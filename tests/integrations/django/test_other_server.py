"""A fairq store on another PostgreSQL server whose database name, port and schema equal
Django's: the enqueue must not join Django's transaction (it would write the job into the
wrong server). A second server is started on 127.0.0.2 with the main one's port."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import psycopg
import pytest
from django.db import connection
from postgres._store import server_url

from fairq import App
from fairq.integrations.django import in_transaction

BIN = Path("/usr/lib/postgresql") / sorted(os.listdir("/usr/lib/postgresql"))[-1] / "bin"
HOST = "127.0.0.2"


def _as_postgres(*argv: str) -> None:
    """Run a server tool as the postgres OS user (initdb refuses root)."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def second_server() -> Iterator[str]:
    """The URL of a fresh server at 127.0.0.2 on the main server's port, with its database."""
    main = urlsplit(server_url())
    port, dbname = main.port or 5432, main.path.lstrip("/")
    home = Path(tempfile.mkdtemp(prefix="fairq-pg2-"))
    if os.geteuid() == 0:
        shutil.chown(home, "postgres", "postgres")
    data = home / "data"
    _as_postgres(f"{BIN}/initdb", "-D", str(data), "-A", "trust", "-U", "postgres")
    options = f"-c listen_addresses={HOST} -p {port} -k {home} -c fsync=off"
    log = str(home / "server.log")  # not our pipes: the server outlives pg_ctl
    _as_postgres(f"{BIN}/pg_ctl", "-D", str(data), "-o", options, "-l", log, "-w", "start")
    try:
        url = f"postgresql://postgres@{HOST}:{port}/{dbname}"
        with psycopg.connect(f"postgresql://postgres@{HOST}:{port}/postgres") as conn:
            conn.autocommit = True
            conn.execute(f'CREATE DATABASE "{dbname}"')
        yield url
    finally:
        _as_postgres(f"{BIN}/pg_ctl", "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(home, ignore_errors=True)


def test_a_store_on_another_server_with_the_same_names_is_not_joined(
    shop: ModuleType, second_server: str
) -> None:
    shop.app.stats()  # the store in Django's database made
    schema = shop.app.backend.schema  # the same schema name on the other server
    elsewhere = App(f"{second_server}?schema={schema}")
    try:
        elsewhere.stats()  # its schema made on the second server
        assert connection.settings_dict["PORT"] == str(urlsplit(second_server).port)
        assert in_transaction(elsewhere) is None  # not the same server: after the commit
        assert in_transaction(shop.app) is not None  # the one in Django's database is joined
    finally:
        elsewhere.close()
