"""Who may read and who may change: the access token, the session cookie, CSRF and host checks.

The rules (docs/dashboard.md):

* The dashboard binds to a loopback address unless it has an access token (``check_bind``):
  anyone who can reach the port could otherwise read every tenant's figures.
* Without a token the dashboard is read-only: no change forms are shown and every POST is
  refused (403). With one, a person signs in by typing it once; the browser then holds a
  session cookie (HttpOnly, SameSite=Strict) signed with the token that expires, is revoked by
  signing out, and is won by guessing at five tries a minute at most (``fairq.web.sessions``).
  A token that looks weak is accepted with a warning (``weak_token``).
* A change (POST) must carry the session cookie, the form's CSRF field (derived from the
  session, so another site cannot know it) and, when the browser sends one, an Origin that is
  this dashboard's own. Pages may not be framed (no clickjacking of the forms).
* Bound to a loopback address, a request must name a loopback host (``Host``), so a web page
  cannot reach the dashboard through DNS rebinding. Bound elsewhere, reading needs the sign-in
  too (or, for a Prometheus scraper of ``/metrics``, the token as a bearer token).
"""

from __future__ import annotations

import hmac
import ipaddress
import itertools
import math
import time
from collections import Counter
from collections.abc import Callable

from starlette.requests import Request

from fairq.errors import ConfigError
from fairq.reports.text import format_age
from fairq.web.sessions import DEFAULT_LIFETIME, Sessions, SignInThrottle

COOKIE = "fairq_session"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("localhost",)
WEAK_BITS = 48.0
WEAK_BITS_PER_CHAR = 3.0  # fewer than 8 characters equally used
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe())'"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, maybe in brackets) is this machine only."""
    bare = host.strip("[]").lower()
    if bare in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback address without a token, and a token too short to guess at."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"the dashboard token is {len(token)} characters; use at least {MIN_TOKEN_CHARS} "
            f"(make one with: {MAKE_TOKEN})"
        )
    if token is not None and not token.isprintable():
        raise ConfigError(
            "the dashboard token holds a character that cannot be typed (a control character "
            f"or a byte that is not UTF-8); make one with: {MAKE_TOKEN}"
        )
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve the dashboard on {host!r} without an access token: anyone who "
            "can reach that address could read every tenant's figures. Give one with --token "
            f"or $FAIRQ_DASHBOARD_TOKEN (make one with: {MAKE_TOKEN}), or bind 127.0.0.1"
        )


def weak_token(token: str) -> str | None:
    """Why ``token`` looks guessable, or None. A rough test, by its characters: one repeated
    (``aaaa…``), a few (``abab…``), a run (``abcd…``), or under ``WEAK_BITS`` bits by the
    Shannon entropy of its character counts. ``token_urlsafe()`` scores about 200 bits."""
    counts = Counter(token)
    per_char = sum(n / len(token) * math.log2(len(token) / n) for n in counts.values())
    bits = per_char * len(token)
    steps = {ord(b) - ord(a) for a, b in itertools.pairwise(token)}
    if len(steps) > 1 and bits >= WEAK_BITS and per_char >= WEAK_BITS_PER_CHAR:
        return None
    return (
        f"the dashboard token looks weak ({len(token)} characters, {len(counts)} different, "
        f"about {bits:.0f} bits by its character counts): whoever can reach the dashboard may "
        f"guess it. Make a strong one with: {MAKE_TOKEN}"
    )


def host_of(header: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8000`` → ``[::1]``, ``a:80`` → ``a``)."""
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Access:
    """The dashboard's access rules for one process (see the module docstring)."""

    def __init__(
        self,
        token: str | None,
        loopback: bool,
        *,
        session_lifetime: float = DEFAULT_LIFETIME,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.token = token
        self.loopback = loopback  # bound to a loopback address
        self.clock = clock
        self.sessions = None if token is None else Sessions(token, session_lifetime)
        self.throttle = SignInThrottle()

    @property
    def changes_allowed(self) -> bool:
        """Whether anyone may change anything (a token was given)."""
        return self.token is not None

    def host_ok(self, request: Request) -> bool:
        """Bound to loopback: the request must name a loopback host (no DNS rebinding)."""
        return not self.loopback or is_loopback(host_of(request.headers.get("host", "")))

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(
            given.encode("utf-8", "surrogatepass"), self.token.encode()
        )

    def new_session(self) -> str:
        """A new session's cookie value (see ``fairq.web.sessions``)."""
        assert self.sessions is not None
        return self.sessions.issue(self.clock())

    def session_nonce(self, request: Request) -> str | None:
        """The nonce of a valid session cookie, else None (no token: nobody is signed in)."""
        value = request.cookies.get(COOKIE)
        if self.sessions is None or value is None:
            return None
        return self.sessions.nonce(value, self.clock())

    def end_session(self, request: Request) -> None:
        """Sign out: this session's cookie, and every copy of it, is refused from now on."""
        value = request.cookies.get(COOKIE)
        if self.sessions is not None and value is not None:
            self.sessions.revoke(value, self.clock())

    def sign_in_wait(self, request: Request) -> float:
        """Seconds this client must wait before its next sign-in attempt (0: none)."""
        return self.throttle.wait(_address(request), self.clock())

    def wrong_token(self, request: Request) -> None:
        self.throttle.wrong(_address(request), self.clock())

    @property
    def lifetime_text(self) -> str:
        """How long a session lasts, as the pages say it (``8 h``)."""
        return format_age(self.sessions.lifetime if self.sessions is not None else 0.0)

    def signed_in(self, request: Request) -> bool:
        return self.session_nonce(request) is not None

    def may_read(self, request: Request) -> bool:
        """Bound to loopback: anyone on this machine. Else: signed in, or (a scraper of
        /metrics) ``Authorization: Bearer TOKEN``."""
        return self.loopback or self.signed_in(request) or self.bearer_ok(request)

    def bearer_ok(self, request: Request) -> bool:
        """``Authorization: Bearer TOKEN``; a wrong one counts as a wrong sign-in (throttled)."""
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or self.sign_in_wait(request) > 0:
            return False
        if self.token_matches(given.strip()):
            return True
        self.wrong_token(request)
        return False

    def csrf_token(self, request: Request) -> str | None:
        """The value change forms carry: bound to the session, unknowable to other sites."""
        nonce = self.session_nonce(request)
        return None if nonce is None or self.sessions is None else self.sessions.csrf(nonce)

    def refuse_change(self, request: Request, csrf: str) -> str | None:
        """Why this POST may not change anything, or None when it may."""
        if self.token is None:
            return (
                "this dashboard is read-only: it was started without an access token "
                "(restart it with --token or $FAIRQ_DASHBOARD_TOKEN to allow changes)"
            )
        expected = self.csrf_token(request)
        if expected is None and COOKIE in request.cookies:
            return f"your session has ended (signed out, or {self.lifetime_text} passed since "
            "you signed in): sign in again"
        if expected is None:
            return "sign in with the dashboard's access token first"
        refused_origin = self.refuse_origin(request)
        if refused_origin is not None:
            return refused_origin
        if not hmac.compare_digest(csrf.encode("utf-8", "surrogatepass"), expected.encode()):
            return "the form is stale or came from another site (CSRF check); reload and retry"
        return None

    def refuse_origin(self, request: Request) -> str | None:
        """A POST whose Origin (or Referer) is another site's is refused."""
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        origin = request.headers.get("origin")
        if origin is None:
            referer = request.headers.get("referer")
            if referer is None:
                return None  # not a browser's cross-site form: the CSRF field still applies
            origin = "/".join(referer.split("/", 3)[:3])
        if origin != own:
            return f"a change must come from this dashboard's own pages ({own}), not {origin}"
        return None


def _address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"
