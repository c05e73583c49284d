"""``sqlite:///relative.db`` and ``sqlite:////absolute.db``, read as SQLAlchemy reads them."""

from __future__ import annotations

from pathlib import Path

from fairq.errors import ConfigError
from fairq.urls import check_query

PREFIX = "sqlite://"
FORMS = "sqlite:///relative/path.db or sqlite:////absolute/path.db"


def path_from_url(url: str) -> Path:
    """The file a URL names. The path is taken verbatim: no %-decoding, and no query string
    (a ``?`` is refused, not made part of a file name)."""
    if not isinstance(url, str) or not url.lower().startswith(PREFIX):
        raise ConfigError(f"{url!r} is not a SQLite store URL; expected {FORMS}")
    check_query(url, {})
    if "?" in url:
        raise ConfigError(
            f"SQLite store URL {url!r} has a '?': this store's URL takes no parameters"
        )
    rest = url[len(PREFIX) :]
    if not rest.startswith("/"):
        raise ConfigError(
            f"SQLite store URL {url!r} names a host ({rest.split('/')[0]!r}); SQLite files are "
            f"local: expected {FORMS}"
        )
    path = rest[1:]
    if not path or path.endswith("/"):
        raise ConfigError(f"SQLite store URL {url!r} names no file; expected {FORMS}")
    if path == ":memory:":
        raise ConfigError(
            "an in-memory SQLite store is not shared between connections; use memory:// for "
            "a process-local store, or a file path"
        )
    return Path(path)
