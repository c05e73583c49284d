"""Store URLs are shown (logs, errors, CLI) with their secrets hidden and the rest as given."""

from __future__ import annotations

import pytest

from fairq.urls import redact_url


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
