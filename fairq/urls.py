"""Store URLs as they may be shown: in logs, errors and CLI output, never with a password."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

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
