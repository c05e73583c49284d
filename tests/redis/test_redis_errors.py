"""Bad stores and bad calls get clear errors, and nothing already stored is harmed."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

import pytest
import redis
from redis_helpers import keys_of, new_job

from fairq.backends import open_backend
from fairq.backends.redis import RedisBackend
from fairq.backends.redis.db import MIN_VERSION, OPEN_RETRIES, RETRIES, check_version
from fairq.backends.redis.keys import LAYOUT
from fairq.backends.redis.records import TenantRecord
from fairq.backends.redis.url import parse_url, redact
from fairq.contract import EnqueueParams, StatsParams
from fairq.errors import ConfigError, PayloadTooLarge, SchemaError, StoreUnavailable


def test_an_unreachable_server_names_the_url_without_its_password() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        open_backend("redis://:hunter2@127.0.0.1:1/0?prefix=x")
    message = str(caught.value)
    assert "127.0.0.1:1" in message
    assert "hunter2" not in message
    assert "***" in message


def test_a_server_that_drops_every_connection_is_given_up_on_soon_at_open() -> None:
    """At open, a few tries (OPEN_RETRIES more), not the RETRIES that ride out a restart once
    connected: ``fairq stats`` against a wrong URL answers at once."""
    accepted = []
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def drop() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = listener.accept()
                    accepted.append(conn)
                    conn.close()

        threading.Thread(target=drop, daemon=True).start()
        with pytest.raises(StoreUnavailable):
            open_backend(f"redis://127.0.0.1:{listener.getsockname()[1]}/0")
    # redis-py may try its handshake again within each try of a connect: at most the square
    tries = 1 + OPEN_RETRIES
    assert tries <= len(accepted) <= tries**2 < (1 + RETRIES) ** 2


def test_redact_hides_user_passwords_only() -> None:
    assert redact("redis://u:pw@h:1/2") == "redis://u:***@h:1/2"
    assert redact("redis://h:1/2") == "redis://h:1/2"
    assert redact("rediss://:p%40ss@h/0") == "rediss://:***@h/0"


@pytest.mark.parametrize("version", ["5.0.14", "6.0.20", "6.2.14", "2.8"])
def test_a_too_old_server_is_refused_naming_both_versions(version: str) -> None:
    with pytest.raises(StoreUnavailable) as caught:
        check_version(version)
    assert version in str(caught.value)
    assert ".".join(map(str, MIN_VERSION)) in str(caught.value)


@pytest.mark.parametrize("version", ["7.0.0", "7.0.15", "7.4.1", "8.0.0-rc1"])
def test_new_enough_servers_are_accepted(version: str) -> None:
    check_version(version.split("-")[0])


def test_the_url_options_are_fairqs_and_the_rest_goes_to_redis_py() -> None:
    options = parse_url("redis://h:6379/3?prefix=app&max_payload_bytes=1000&socket_timeout=2")
    assert (options.prefix, options.max_payload_bytes) == ("app", 1000)
    assert options.client_url == "redis://h:6379/3?socket_timeout=2"
    with pytest.raises(ConfigError):
        parse_url("redis://h/0?max_payload_bytes=lots")


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("max_payload_bytes=²", "max_payload_bytes"),
        ("max_payload_bytes=10", "max_payload_bytes"),
        ("wait_replicas=①", "wait_replicas"),
        ("wait_replicas=-1", "wait_replicas"),
    ],
)
def test_a_number_in_the_url_that_is_not_one_is_one_line_naming_it(query: str, named: str) -> None:
    """``str.isdigit`` passes ``²``, which ``int`` refuses: URL numbers go through read_int."""
    with pytest.raises(ConfigError, match=named) as caught:
        parse_url(f"redis://h/0?{query}")
    assert "\n" not in str(caught.value) and "from " in str(caught.value)


def test_a_queue_key_of_another_type_is_refused_and_left_alone(
    backend: RedisBackend, raw: redis.Redis, prefix: str
) -> None:
    clash = f"{prefix}:{{default}}:jobs"
    raw.set(clash, "not fairq's")
    with pytest.raises(SchemaError) as caught:
        backend.enqueue(EnqueueParams(jobs=[new_job(0), new_job(1)], now=0.0))
    assert clash in str(caught.value) and "prefix" in str(caught.value)
    assert raw.get(clash) == b"not fairq's"
    assert keys_of(raw, prefix) == [clash.encode()]
    backend.enqueue(EnqueueParams(jobs=[new_job(2, queue="other")], now=0.0))  # others work


def test_records_of_the_old_text_layout_are_refused_not_misread(
    backend: RedisBackend, raw: redis.Redis, prefix: str
) -> None:
    meta, tenants = f"{prefix}:{{default}}:meta", f"{prefix}:{{default}}:tenants"
    raw.hset(meta, mapping={"ntid": "1", "V": "0"})  # as an older fairq left it: no layout
    raw.hset(tenants, "1", "0,,1,0,0,0,0,0,,,,,,0,0,,,")
    with pytest.raises(SchemaError) as caught:
        backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    assert "layout" in str(caught.value) and "prefix" in str(caught.value)
    assert raw.hgetall(tenants) == {b"1": b"0,,1,0,0,0,0,0,,,,,,0,0,,,"}
    stored = raw.hget(tenants, "1")
    assert isinstance(stored, bytes)
    with pytest.raises(SchemaError):  # reads refuse the record rather than misread it
        TenantRecord.parse(stored)


def test_a_queue_of_the_earlier_binary_layout_is_refused_not_misread(
    backend: RedisBackend, raw: redis.Redis, prefix: str
) -> None:
    meta = f"{prefix}:{{default}}:meta"
    raw.hset(meta, mapping={"ntid": "1", "V": "0", "layout": "2"})  # short eligible members
    with pytest.raises(SchemaError) as caught:
        backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    assert "layout" in str(caught.value) and "prefix" in str(caught.value)
    assert raw.hgetall(meta) == {b"ntid": b"1", b"V": b"0", b"layout": b"2"}
    assert raw.hget(f"{prefix}:dir", "j0") is None


def test_a_new_queue_records_its_layout(
    backend: RedisBackend, raw: redis.Redis, prefix: str
) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    assert raw.hget(f"{prefix}:{{default}}:meta", "layout") == LAYOUT.encode()


def test_a_global_key_of_another_type_is_refused_when_opening(
    make_backend: Callable[..., RedisBackend], raw: redis.Redis, prefix: str
) -> None:
    raw.rpush(f"{prefix}:dir", "x")
    with pytest.raises(SchemaError):
        make_backend()
    assert raw.lrange(f"{prefix}:dir", 0, -1) == [b"x"]


def test_a_payload_over_the_limit_is_refused_and_nothing_is_stored(
    make_backend: Callable[..., RedisBackend], raw: redis.Redis, prefix: str
) -> None:
    backend = make_backend(max_payload_bytes=100)
    big = '{"args":["' + "x" * 200 + '"],"kwargs":{}}'
    with pytest.raises(PayloadTooLarge) as caught:
        backend.enqueue(EnqueueParams(jobs=[new_job(0), new_job(1, payload=big)], now=0.0))
    assert "j1" in str(caught.value) and "100" in str(caught.value)
    assert backend.stats(StatsParams()) == []
    assert keys_of(raw, prefix) == []
