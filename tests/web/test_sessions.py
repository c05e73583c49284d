"""Signed-in sessions as a careful operator expects them (issue #31, item 8): they expire, signing
out revokes a copied cookie, wrong tokens are throttled, a weak token is warned about, and another
site cannot sign a person out. A real ``fairq dashboard`` process; Chromium where a browser's own
rules (SameSite, Origin) are what is tested."""

from __future__ import annotations

import http.server
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from fairq.app import App

from .conftest import TOKEN
from .helpers import Dashboard, flood, wait_for
from .test_pages import sign_in

OpenDashboard = Callable[..., Dashboard]
TENANT_FORM = "/queues/demo/tenant?id=greedy"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def request(
    url: str, fields: dict[str, str] | None = None, cookie: str | None = None
) -> tuple[int, dict[str, str], str]:
    """One request, redirects not followed: status, headers (lower-case names), body."""
    body = None if fields is None else urllib.parse.urlencode(fields).encode()
    headers = {} if cookie is None else {"Cookie": cookie}
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, data=body, headers=headers), timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read().decode()


def sign_in_by_script(board: Dashboard, token: str = TOKEN) -> str:
    """POST /login; the session cookie (``fairq_session=…``) it sets."""
    status, headers, body = request(board.base + "/login", {"token": token, "next": "/"})
    assert status == 303, body
    return headers["set-cookie"].split(";")[0]


def signed_in(board: Dashboard, cookie: str) -> bool:
    """Whether the dashboard takes ``cookie`` for a session (its pages offer to sign out)."""
    status, _, body = request(board.base + "/", cookie=cookie)
    assert status == 200
    return 'action="/logout"' in body


def csrf_of(board: Dashboard, cookie: str) -> str:
    _, _, body = request(board.base + TENANT_FORM, cookie=cookie)
    found = re.search(r'name="csrf" value="([^"]+)"', body)
    assert found, body
    return found.group(1)


def change_weight(board: Dashboard, cookie: str, csrf: str) -> tuple[int, str]:
    status, _, body = request(board.base + TENANT_FORM, {"weight": "7", "csrf": csrf}, cookie)
    return status, body


def browser_session(page: Page) -> str:
    cookie = next(c for c in page.context.cookies() if c["name"] == "fairq_session")
    return f"fairq_session={cookie['value']}"


def test_a_session_lasts_8_hours_by_default_and_as_long_as_configured(
    app: App, open_dashboard: OpenDashboard, page: Page
) -> None:
    flood(app, greedy=3, small=1, per_small=1)
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    expect(page.locator("#sign-out")).to_be_visible()
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "fairq_session"]
    assert 8 * 3600 - 60 < cookie["expires"] - time.time() <= 8 * 3600

    short = open_dashboard(app.url, "--token", TOKEN, "--session-lifetime", "5s")
    session = sign_in_by_script(short)
    assert signed_in(short, session)
    csrf = csrf_of(short, session)
    # the server ends it, whatever the client does with its copy of the cookie
    wait_for(lambda: not signed_in(short, session), "the 5 s session to expire")
    status, body = change_weight(short, session, csrf)
    assert status == 403
    assert "your session has ended" in body
    assert app.stats(queue="demo", tenant="greedy")[0].weight == 1.0


def test_signing_out_revokes_every_copy_of_the_cookie(
    app: App, open_dashboard: OpenDashboard, page: Page
) -> None:
    flood(app, greedy=3, small=1, per_small=1)
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    copied = browser_session(page)
    csrf = csrf_of(board, copied)
    assert signed_in(board, copied)
    page.locator("#sign-out button").click()
    expect(page.locator("#sign-in")).to_be_visible()
    assert not signed_in(board, copied)
    status, body = change_weight(board, copied, csrf)
    assert status == 403 and "your session has ended" in body
    assert app.stats(queue="demo", tenant="greedy")[0].weight == 1.0
    other = sign_in_by_script(board)  # other sessions are untouched by one sign-out
    assert signed_in(board, other)


def test_wrong_tokens_are_throttled_with_a_clear_message(
    app: App, open_dashboard: OpenDashboard, page: Page
) -> None:
    board = open_dashboard(app.url, "--token", TOKEN)
    for n in range(5):
        status, _, body = request(board.base + "/login", {"token": f"guess-number-{n}-xxxxxxx"})
        assert status == 403 and "wrong token" in body
    # the next try, within the 12 s that follow, is refused unread: the right token too, so
    # guessing cannot go on unseen
    sign_in(page, board)
    expect(page.locator("#message")).to_contain_text("too many wrong tokens from your address")
    expect(page.locator("#message")).to_contain_text("then try again")
    expect(page.locator("#sign-out")).to_have_count(0)
    status, headers, body = request(board.base + "/login", {"token": TOKEN})
    assert status == 429, body
    assert 0 < int(headers["retry-after"]) <= 12
    assert "set-cookie" not in headers


def test_a_weak_token_is_warned_about_at_start(app: App, open_dashboard: OpenDashboard) -> None:
    weak = open_dashboard(app.url, "--token", "a" * 16)
    assert "the dashboard token looks weak (16 characters, 1 different" in weak.log()
    assert "secrets.token_urlsafe" in weak.log()
    strong = open_dashboard(app.url, "--token", TOKEN)
    assert "looks weak" not in strong.log()


class AttackPage(http.server.BaseHTTPRequestHandler):
    """Another site's page: a form that POSTs to the dashboard's /logout."""

    target = ""

    def do_GET(self) -> None:
        page = (
            f'<form method="post" action="{self.target}/logout" id="attack">'
            '<button type="submit">win a prize</button></form>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def attacker() -> Iterator[Callable[[str], int]]:
    """``attacker(dashboard_base)``: serves the attack page; its port."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def serve(target: str) -> int:
        handler = type("Attack", (AttackPage,), {"target": target})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return int(server.server_address[1])

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_another_site_cannot_sign_a_person_out(
    app: App, open_dashboard: OpenDashboard, page: Page, attacker: Callable[[str], int]
) -> None:
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    expect(page.locator("#sign-out")).to_be_visible()
    session = browser_session(page)
    port = attacker(board.base)
    # cross-site (localhost is another site than 127.0.0.1: the browser sends no cookie), and
    # same-site from another origin (another port: the cookie goes along, the Origin differs)
    for attack in (f"http://localhost:{port}/", f"http://127.0.0.1:{port}/"):
        page.goto(attack)
        page.locator("#attack button").click()
        page.wait_for_load_state()
        page.goto(board.base + "/")
        expect(page.locator("#sign-out")).to_be_visible()
        assert browser_session(page) == session
        assert signed_in(board, session)
