"""Signed-in sessions: a cookie that expires, can be revoked, and is only won slowly by guessing.

* **The cookie** is ``NONCE.ISSUED.SIGNATURE``: a random nonce, the Unix time it was issued, and
  an HMAC-SHA256 of both under the access token. It proves itself, so a dashboard served by
  several processes accepts a sign-in made at any of them, and changing the token ends every
  session.
* **Expiry**: a session lasts ``lifetime`` seconds from sign-in (``DEFAULT_LIFETIME``, 8 hours,
  a working day; ``fairq dashboard --session-lifetime``). The server checks the issue time; the
  cookie's own Max-Age only tidies the browser.
* **Revocation**: signing out records the nonce as revoked until the session would have expired
  anyway, so a copy of the cookie stops working too. The record is kept in the memory of the
  process that served the sign-out (``fairq dashboard`` is one process): after a restart, or at
  another process with the same token, a copy is accepted until it expires. Changing the token
  ends every session for certain.
* **Throttling**: wrong tokens are counted per client address with GCRA
  (``fairq.policy.rate``, the rule tenants' rates use): ``GUESSES`` back to back, then one per
  ``GUESS_INTERVAL`` seconds. While an address waits, every attempt from it is refused unread,
  the right token too, so guessing cannot go on in the background.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from fairq.policy import rate

DEFAULT_LIFETIME = 8 * 3600.0
GUESSES = 5  # wrong tokens an address may send back to back
GUESS_INTERVAL = 12.0  # then one every this many seconds: 5 a minute
MAX_ADDRESSES = 100_000  # addresses remembered by the throttle (a flood of them cannot grow it)


@dataclass
class Sessions:
    """Issues and checks session cookies signed with ``token``; remembers sign-outs."""

    token: str
    lifetime: float = DEFAULT_LIFETIME
    revoked: dict[str, float] = field(default_factory=dict)  # nonce -> when it expires anyway

    def issue(self, now: float) -> str:
        """A new session's cookie value."""
        nonce = secrets.token_urlsafe(18)
        issued = str(int(now))
        return f"{nonce}.{issued}.{self._sign('session', nonce, issued)}"

    def nonce(self, cookie: str, now: float) -> str | None:
        """The session's nonce when ``cookie`` is one this dashboard issued, unexpired and not
        revoked; else None. Any text is safe here (non-ASCII, over-long, malformed)."""
        if not cookie.isascii() or len(cookie) > 200:
            return None
        parts = cookie.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        nonce, issued, signature = parts
        if not hmac.compare_digest(signature, self._sign("session", nonce, issued)):
            return None
        if now >= int(issued) + self.lifetime or nonce in self.revoked:
            return None
        return nonce

    def revoke(self, cookie: str, now: float) -> None:
        """Sign out: the session (and every copy of its cookie) is refused from now on."""
        nonce = self.nonce(cookie, now)
        if nonce is None:
            return
        issued = int(cookie.split(".")[1])
        self.revoked = {n: until for n, until in self.revoked.items() if until > now}
        self.revoked[nonce] = issued + self.lifetime

    def csrf(self, nonce: str) -> str:
        """The field change forms carry: bound to the session, unknowable to other sites."""
        return self._sign("csrf", nonce)

    def _sign(self, purpose: str, *parts: str) -> str:
        message = "|".join((purpose, *parts)).encode()
        return hmac.new(self.token.encode(), message, hashlib.sha256).hexdigest()


@dataclass
class SignInThrottle:
    """Wrong tokens per client address, limited by GCRA (see the module docstring)."""

    guesses: int = GUESSES
    interval: float = GUESS_INTERVAL
    tats: dict[str, float] = field(default_factory=dict)  # address -> theoretical arrival time

    def wait(self, address: str, now: float) -> float:
        """Seconds until ``address`` may try again (0: now)."""
        tat = self.tats.get(address)
        if tat is None:
            return 0.0
        return max(0.0, rate.next_start(tat, self.interval, self._tolerance) - now)

    def wrong(self, address: str, now: float) -> None:
        """Count a wrong token from ``address``."""
        if len(self.tats) >= MAX_ADDRESSES:
            self.tats = {a: t for a, t in self.tats.items() if t > now}
            while len(self.tats) >= MAX_ADDRESSES:
                del self.tats[next(iter(self.tats))]
        tat = rate.after_start(self.tats.pop(address, None), now, self.interval)
        self.tats[address] = tat

    @property
    def _tolerance(self) -> float:
        return self.interval * (self.guesses - 1)
