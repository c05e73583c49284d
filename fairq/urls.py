"""Store URLs as they may be shown (in logs, errors and CLI output, never with a password), and
the one check of a URL's query parameters every store makes."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit

from fairq.errors import ConfigError

SECRET_KEYS = frozenset({"password", "passwd", "pwd", "secret", "token"})


def redact_url(url: str) -> str:
    """The URL with its password (in user-info or a query parameter) shown as ``***``.

    Only the secret is replaced (by string surgery: ``urlunsplit`` would rewrite ``sqlite:///``).
    """
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "(unparsable URL hidden)"
    if password is not None:
        start = url.index("://") + 3
        at = url.index("@", start)
        user = url[start:at].split(":", 1)[0]
        url = f"{url[:start]}{user}:***{url[at:]}"
    if parts.query:
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        hidden = [(k, "***" if k.lower() in SECRET_KEYS else v) for k, v in pairs]
        if hidden != pairs:
            url = url.replace(parts.query, urlencode(hidden, safe="*"), 1)
    return url


def check_query(
    url: str, known: Mapping[str, Sequence[str]], *, more: Collection[str] = ()
) -> None:
    """ConfigError for the first query parameter of ``url`` that no one takes: a typo such as
    ``?prefx=`` must not reach a client library as a traceback, or become part of a file name.

    ``known``: each taker (``"fairq"``, ``"redis-py"``) and the names it takes, all shown in
    the message; ``more``: further names taken, too many to list (shown as ``…``)."""
    query = urlsplit(url).query
    names = [key for key, _ in parse_qsl(query, keep_blank_values=True)]
    if query and not names:  # such as "&"
        names = [query]
    taken = {name for group in known.values() for name in group} | set(more)
    for name in names:
        if name in taken:
            continue
        close = difflib.get_close_matches(name, sorted(taken), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        if not known:
            raise ConfigError(
                f"unknown parameter {name!r} in the store URL {redact_url(url)}: this store's "
                "URL takes no parameters"
            )
        lists = "; ".join(
            f"{taker}'s {', '.join(group)}{', …' if more and i == len(known) - 1 else ''}"
            for i, (taker, group) in enumerate(known.items())
        )
        raise ConfigError(
            f"unknown parameter {name!r} in the store URL {redact_url(url)}{hint}; known: {lists}"
        )
