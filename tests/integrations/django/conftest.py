"""The Django example shop (examples/django) set up once per test session, against the real
PostgreSQL server (``$FAIRQ_TEST_POSTGRES_URL``): Django's tables in a fresh schema, fairq's
store in another fresh schema of the same database; both dropped at the end.

Django is configured once per process, so the environment the example's settings read is set
only while they are read, then put back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
from postgres._store import drop_schema, fresh_schema, server_url

from fairq.backends.postgres.sql import quote_ident

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "django"


@pytest.fixture(scope="session")
def shop_env() -> dict[str, str]:
    """The environment the example reads (its settings, a worker process): fresh schemas."""
    return {
        "DATABASE_URL": server_url(),
        "DJANGO_SCHEMA": fresh_schema(),
        "FAIRQ_URL": f"{server_url()}?schema={fresh_schema()}",
        "DJANGO_SETTINGS_MODULE": "shop.settings",
    }


@pytest.fixture(scope="session")
def shop(shop_env: dict[str, str]) -> Iterator[ModuleType]:
    """The example's ``shop.jobs`` module (its App and job), Django set up and migrated."""
    env = shop_env
    django_schema = env["DJANGO_SCHEMA"]
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {quote_ident(django_schema)}")
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    sys.path.insert(0, str(EXAMPLE))
    try:
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        import shop.jobs
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        yield shop.jobs
    finally:
        from django.db import connections

        shop.jobs.app.close()
        connections.close_all()
        drop_schema(shop.jobs.app.backend.schema)
        drop_schema(django_schema)
