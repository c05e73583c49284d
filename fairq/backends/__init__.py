"""Stores. ``open_backend(url)`` picks one by the URL's scheme; each lives in its own package."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fairq.backends.clock import Clock
from fairq.contract import Backend
from fairq.errors import ConfigError

SCHEMES = {
    "sqlite": "sqlite:///relative/path.db or sqlite:////absolute/path.db",
    "memory": "memory:// (the reference model: one process only, nothing persisted)",
    "redis": "redis://[:password@]host:6379/0[?prefix=fairq] (also rediss://, unix://; a Redis "
    "Cluster: redis://host:7000/0?cluster=1)",
    "postgresql": "postgresql://user:password@host:5432/db[?schema=fairq&migrate=false]",
}


ALIASES = {"rediss": "redis", "unix": "redis", "postgres": "postgresql"}
#: The extra each server store needs installed, and the top-level modules it brings.
EXTRAS = {
    "redis": ("redis", ("redis", "hiredis")),
    "postgresql": ("postgres", ("psycopg", "psycopg_pool")),
}


def check_url(url: object) -> str:
    """The store kind a URL names, without opening anything; ConfigError for a bad URL."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"store URL {url!r} is not a URL; expected one of: {_expected()}")
    scheme = urlsplit(url).scheme.lower()
    kind = ALIASES.get(scheme, scheme)
    if kind not in SCHEMES:
        raise ConfigError(
            f"store URL scheme {scheme!r} is not supported; expected one of: {_expected()}"
        )
    return kind


def open_backend(url: str, *, clock: Clock | None = None) -> Backend:
    """Open the store a URL names. Raises ConfigError naming the problem for a bad URL.

    ``clock`` overrides the URL's ``clock`` option (fairq.backends.clock)."""
    scheme = check_url(url)
    if scheme == "memory":
        from fairq.model import ReferenceModel

        return ReferenceModel()
    if scheme == "sqlite":
        from fairq.backends.sqlite import SQLiteBackend

        return SQLiteBackend.from_url(url, clock=clock or Clock.STORE)
    if scheme == "redis":
        with needs_extra("redis"):
            from fairq.backends.redis import RedisBackend

        return RedisBackend.from_url(_with_clock(url, clock))
    with needs_extra("postgresql"):
        from fairq.backends.postgres import PostgresBackend

    return PostgresBackend.from_url(_with_clock(url, clock))


def _with_clock(url: str, clock: Clock | None) -> str:
    """The URL with its ``clock`` option set to ``clock`` (unchanged when None)."""
    if clock is None:
        return url
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "clock"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("clock", clock.value)])))


@contextmanager
def needs_extra(kind: str) -> Iterator[None]:
    """Imports of a server store: a missing client library becomes the pip command to run."""
    try:
        yield
    except ModuleNotFoundError as exc:
        extra, modules = EXTRAS[kind]
        if (exc.name or "").partition(".")[0] not in modules:
            raise
        raise ConfigError(
            f"{kind} store URLs need fairq's {extra!r} extra, which is not installed (no module "
            f"named {exc.name!r}): pip install 'fairq[{extra}]'"
        ) from None


def _expected() -> str:
    return "; ".join(SCHEMES.values())
