"""Server settings fairq depends on: a Redis that may evict fairq's keys is reported at start.

Each test runs a private ``redis-server`` with the setting under test, so no other test sees it.
"""

from __future__ import annotations

import logging

import pytest
from redis_helpers import NO_PERSISTENCE, free_port, start_server

from fairq.backends.redis import RedisBackend

EVICTION = "maxmemory-policy"


def open_with(caplog: pytest.LogCaptureFixture, *settings: str) -> list[str]:
    """Open a store on a private server started with ``settings``; the warnings logged."""
    port = free_port()
    server = start_server(port, *NO_PERSISTENCE, *settings)
    try:
        with caplog.at_level(logging.WARNING, logger="fairq.backends.redis"):
            RedisBackend.from_url(f"redis://:secret@127.0.0.1:{port}/0").close()
    finally:
        server.terminate()
        server.wait()
    return [r.getMessage() for r in caplog.records if EVICTION in r.getMessage()]


def test_an_evicting_server_is_reported_with_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    [warning] = open_with(caplog, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
    assert "allkeys-lru" in warning and "noeviction" in warning
    assert "secret" not in warning  # the URL is named without its password


@pytest.mark.parametrize(
    "settings",
    [
        ("--maxmemory", "100mb", "--maxmemory-policy", "noeviction"),
        ("--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"),  # only keys with a TTL
        ("--maxmemory", "0", "--maxmemory-policy", "allkeys-lru"),  # no limit: never evicts
    ],
)
def test_a_server_that_keeps_fairqs_keys_is_not_reported(
    caplog: pytest.LogCaptureFixture, settings: tuple[str, ...]
) -> None:
    assert open_with(caplog, *settings) == []
