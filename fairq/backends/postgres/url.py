"""``postgresql://`` URLs: fairq's own options, and a form that is safe to print."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from psycopg import pq

from fairq.backends.postgres.sql import check_schema_name
from fairq.errors import ConfigError
from fairq.policy.bounds import read_int
from fairq.urls import check_query

DEFAULT_SCHEMA = "fairq"
DEFAULT_POOL_SIZE = 10
_FAIRQ_OPTIONS = ("schema", "migrate", "pool_size", "clock")
#: libpq's connection parameters named in the message for an unknown one (it takes ~50).
LIBPQ_SHOWN = ("sslmode", "connect_timeout", "application_name", "options", "target_session_attrs")
CLOCKS = ("store", "caller")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class PostgresUrl:
    """A store URL split into what libpq takes and what fairq takes.

    ``?schema=NAME`` puts fairq's tables in their own schema (default ``fairq``) beside the
    application's; ``?migrate=false`` forbids creating or upgrading it on first use (then run
    ``fairq migrate``); ``?pool_size=N`` caps the connections one backend object opens.
    ``?clock=store`` (the default) stamps every event with the later of the caller's ``now``
    and the server's clock once the event's locks are held, so a call re-sent after an outage
    or kept waiting for a lock never hands out a lease that started in the past;
    ``?clock=caller`` keeps the caller's ``now`` exactly (tests on a virtual clock).
    Every other query parameter goes to libpq unchanged (``sslmode``, ``connect_timeout``, …).
    """

    conninfo: str
    display: str  # the URL without its password, for messages and logs
    schema: str = DEFAULT_SCHEMA
    migrate: bool = True
    pool_size: int = DEFAULT_POOL_SIZE
    clock: str = "store"


def parse_url(url: str, *, schema: str | None = None, migrate: bool | None = None) -> PostgresUrl:
    """Split ``url``; keyword arguments override the URL's own fairq options."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise ConfigError(f"not a PostgreSQL URL: {redact(url)!r}")
    check_query(url, {"fairq": _FAIRQ_OPTIONS, "libpq": LIBPQ_SHOWN}, more=libpq_options())
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _FAIRQ_OPTIONS:
            ours[key] = value
        else:
            theirs.append((key, value))
    conninfo = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(theirs)))
    return PostgresUrl(
        conninfo=conninfo,
        display=redact(conninfo),
        schema=check_schema_name(
            schema if schema is not None else ours.get("schema", DEFAULT_SCHEMA)
        ),
        migrate=migrate if migrate is not None else _flag(ours.get("migrate", "true"), url),
        pool_size=_pool_size(ours.get("pool_size", str(DEFAULT_POOL_SIZE)), url),
        clock=_clock(ours.get("clock", "store"), url),
    )


@functools.cache
def libpq_options() -> frozenset[str]:
    """Every connection parameter the installed libpq takes (its own list), and ``ssl``, which
    it takes in a URL for JDBC's sake."""
    return frozenset(o.keyword.decode() for o in pq.Conninfo.get_defaults()) | {"ssl"}


def redact(url: str) -> str:
    """The URL with any password (in the user part or the query) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{host}"
        query = urlencode(
            [
                (key, "***" if key == "password" else value)
                for key, value in parse_qsl(parts.query, keep_blank_values=True)
            ]
        )
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:
        return "<unparseable URL>"


def _flag(value: str, url: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigError(f"migrate={value!r} in {redact(url)!r} must be true or false")


def _pool_size(value: str, url: str) -> int:
    return read_int(value, f"pool_size in {redact(url)!r}", least=1)


def _clock(value: str, url: str) -> str:
    if value not in CLOCKS:
        raise ConfigError(
            f"clock={value!r} in {redact(url)!r} must be store (events take the server's time) "
            "or caller (events take the now the caller passes)"
        )
    return value
