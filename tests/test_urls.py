"""Store URLs are shown (logs, errors, CLI) with their secrets hidden and the rest as given."""

from __future__ import annotations

import pytest

from fairq.backends import open_backend
from fairq.errors import ConfigError
from fairq.urls import check_query, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite:///fairq.db", "sqlite:///fairq.db"),
        ("sqlite:////abs/path.db", "sqlite:////abs/path.db"),
        ("memory://", "memory://"),
        ("redis://user:pw@host:6379/0", "redis://user:***@host:6379/0"),
        ("redis://:pw@host/0", "redis://:***@host/0"),
        ("postgresql://u:p%40ss@db/x?sslmode=require", "postgresql://u:***@db/x?sslmode=require"),
        (
            "postgresql://u@h/db?password=pw&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        ("postgresql://db/x?token=t&a=b", "postgresql://db/x?token=***&a=b"),
    ],
)
def test_passwords_are_hidden_and_nothing_else_changes(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_redis_database_the_server_lacks_is_a_config_error_naming_it() -> None:
    import os
    from urllib.parse import urlsplit

    from fairq import App
    from fairq.errors import ConfigError

    server = urlsplit(os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9"))
    app = App(f"redis://{server.netloc}/99")
    with pytest.raises(ConfigError, match=r"has no database 99: .*use a lower number"):
        app.stats()
    app.close()


def test_an_unknown_query_parameter_is_named_with_the_known_ones_and_a_close_match() -> None:
    known = {"fairq": ("prefix", "clock"), "client": ("db",)}
    with pytest.raises(ConfigError) as caught:
        check_query("redis://h/0?db=1&prefx=a&other=b", known)
    assert str(caught.value) == (
        "unknown parameter 'prefx' in the store URL redis://h/0?db=1&prefx=a&other=b "
        "(did you mean 'prefix'?); known: fairq's prefix, clock; client's db"
    )
    with pytest.raises(ConfigError, match=r"'x' .*; known: fairq's prefix, clock; client's db, …$"):
        check_query("redis://h/0?x=1", known, more={"socket_timeout"})
    check_query("redis://h/0?socket_timeout=1&prefix=p", known, more={"socket_timeout"})
    with pytest.raises(
        ConfigError, match=r"'password' in the store URL redis://h/0\?password=\*\*\*"
    ):
        check_query("redis://h/0?password=secret", {})


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("sqlite:///fairq.db?foo=1", "'foo'"),
        ("sqlite:///fairq.db?", "a '?'"),
        ("sqlite:///a?b", "'b'"),
        ("redis://127.0.0.1:1/0?prefx=x", "'prefx'"),
        ("redis://127.0.0.1:1/0?ssl_certfile=x", "'ssl_certfile'"),  # TLS only: rediss://
        ("postgresql://u@127.0.0.1:1/db?shema=x", "'shema'"),
    ],
)
def test_every_store_refuses_an_unknown_query_parameter_before_connecting(
    url: str, name: str
) -> None:
    with pytest.raises(ConfigError, match=name):
        open_backend(url)


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:1/0?prefix=p&socket_timeout=1&client_name=me&max_connections=4",
        "rediss://127.0.0.1:1/0?ssl_certfile=x&ssl_cert_reqs=none",
        "postgresql://u@127.0.0.1:1/db?schema=s&sslmode=disable&ssl=true&keepalives=1",
    ],
)
def test_the_client_librarys_own_parameters_still_pass(url: str) -> None:
    from fairq.backends.postgres.url import parse_url as parse_postgres
    from fairq.backends.redis.url import parse_url as parse_redis

    (parse_postgres if url.startswith("postgresql") else parse_redis)(url)
