"""Every form field, query parameter and cookie of the dashboard, given anything a person or
a script can send: never a 5xx or a traceback, and a refusal says what is wrong (issue #31).

One real ``fairq dashboard`` process (SQLite, with a token, signed in) serves the whole module;
Hypothesis sends the values over HTTP. ``INPUTS`` names every input the pages read, and
``test_inputs_cover_what_the_pages_read`` checks it against the source, so a new field cannot
be left out.
"""

from __future__ import annotations

import http.client
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fairq.demo.jobs import make_app

from .conftest import TOKEN
from .helpers import ROOT, Dashboard, flood, start_dashboard

#: (method, path, the input read) for every input the dashboard reads from a request.
INPUTS: list[tuple[str, str, str]] = [
    ("GET", "/queues/demo", "q"),
    ("GET", "/queues/demo", "status"),
    ("GET", "/queues/demo", "sort"),
    ("GET", "/queues/demo", "dir"),
    ("GET", "/queues/demo", "page"),
    ("GET", "/queues/demo", "size"),
    ("GET", "/queues/demo/tenant", "id"),
    ("GET", "/queues/demo/tenant", "done"),
    ("GET", "/jobs", "id"),
    ("GET", "/jobs", "done"),
    ("GET", "/dead", "queue"),
    ("GET", "/dead", "tenant"),
    ("GET", "/dead", "requeued"),
    ("GET", "/login", "next"),
    ("GET", "/api/queues/demo/throughput", "keep"),
    ("POST", "/queues/demo/tenant?id=greedy", "weight"),
    ("POST", "/queues/demo/tenant?id=greedy", "max_running"),
    ("POST", "/queues/demo/tenant?id=greedy", "rate"),
    ("POST", "/queues/demo/tenant?id=greedy", "burst"),
    ("POST", "/queues/demo/tenant?id=greedy", "action"),
    ("POST", "/queues/demo/tenant?id=greedy", "csrf"),
    ("POST", "/dead/requeue", "id"),
    ("POST", "/dead/requeue", "queue"),
    ("POST", "/dead/requeue", "tenant"),
    ("POST", "/jobs/cancel", "id"),
    ("POST", "/login", "token"),
    ("POST", "/login", "next"),
    ("POST", "/logout", "csrf"),
]
#: What a form sends besides the field under test (a valid change, so the field decides).
VALID = {
    "/queues/demo/tenant?id=greedy": {"weight": "1", "max_running": "", "rate": "", "burst": ""},
    "/dead/requeue": {"id": "no-such-job"},
    "/jobs/cancel": {"id": "no-such-job"},
    "/login": {"next": "/"},
    "/logout": {},
}
#: What the issue found, and its kin: digits ``int`` refuses or reads against intent.
NASTY = ["²", "①", "١٢", "1_000", "+7", "-1", "0", " 7 ", "9" * 5000, "1e3", "0x10", "\x00"]

values = st.one_of(
    st.sampled_from(NASTY),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=30),
    st.from_regex(r"\A[0-9]{1,12}\Z"),
    st.integers(-(2**70), 2**70).map(str),
)


@dataclass
class Served:
    board: Dashboard
    cookie: str
    csrf: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("inputs")
    app = make_app(f"sqlite:///{workdir / 'fairq.db'}")
    app.publish()
    flood(app, greedy=20, small=2, per_small=2)
    board = start_dashboard(app.url, workdir, "--token", TOKEN)
    try:
        status, headers, _ = send(board, "POST", "/login", {"token": TOKEN, "next": "/"})
        assert status == 303
        cookie = headers["set-cookie"].split(";")[0]
        _, _, page = send(board, "GET", "/queues/demo/tenant?id=greedy", cookie=cookie)
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found, page
        yield Served(board, cookie, found.group(1))
        assert "Traceback" not in board.log(), board.log()
    finally:
        board.stop()
        app.close()


def send(
    board: Dashboard,
    method: str,
    target: str,
    fields: dict[str, str | bytes] | None = None,
    *,
    cookie: str | bytes | None = None,
) -> tuple[int, dict[str, str], str]:
    """One request as a script would send it: raw bytes allowed in the query and the cookie."""
    parts = urllib.parse.urlsplit(board.base)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    headers: dict[str, str | bytes] = {}
    body = None
    if cookie is not None:
        headers["Cookie"] = cookie
    if fields is not None:
        body = "&".join(f"{k}={quote(v)}" for k, v in fields.items())
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        conn.request(method, target, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read().decode("utf-8", "replace")
        found = {k.lower(): v for k, v in response.getheaders()}
        return response.status, found, text
    finally:
        conn.close()


def quote(value: str | bytes) -> str:
    return urllib.parse.quote_from_bytes(value if isinstance(value, bytes) else value.encode())


def assert_answered(status: int, body: str, what: str) -> None:
    """No 5xx; a refusal carries its message: the page's #message, the API's JSON, or (a
    request the HTTP server itself refuses, e.g. a control character in a header) plain text."""
    assert status < 500, f"{what}: {status}\n{body[:2000]}"
    if status >= 400:
        message = re.search(r'id="message"[^>]*>(.*?)</(p|div)>', body, re.S)
        if message is not None:
            assert message.group(1).strip(), f"{what}: {status} with an empty message"
        else:
            plain = not body.lstrip().startswith("<") and body.strip()
            assert '"error":' in body or plain, f"{what}: {status} without a message\n{body}"


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(target=st.sampled_from(INPUTS), value=st.one_of(values, st.binary(max_size=12)))
@example(target=("GET", "/queues/demo", "page"), value="²")
@example(target=("GET", "/queues/demo", "size"), value="²")
@example(target=("GET", "/dead", "requeued"), value="²")
@example(target=("POST", "/queues/demo/tenant?id=greedy", "max_running"), value="²")
@example(target=("POST", "/queues/demo/tenant?id=greedy", "burst"), value="①")
def test_any_value_of_any_input_is_answered_without_a_server_error(
    served: Served, target: tuple[str, str, str], value: str | bytes
) -> None:
    method, path, name = target
    if method == "GET":
        status, _, body = send(
            served.board, method, f"{path}?{name}={quote(value)}", cookie=served.cookie
        )
    else:
        fields: dict[str, str | bytes] = {"csrf": served.csrf, **VALID[path]}
        fields[name] = value
        status, _, body = send(served.board, method, path, fields, cookie=served.cookie)
    assert_answered(status, body, f"{method} {path} {name}={value!r}")


@settings(max_examples=60, deadline=None)
@given(value=st.one_of(st.binary(max_size=40), st.text(max_size=40)))
@example(value="fairq_session=é.ü".encode("latin-1"))
@example(value="fairq_session=é.ü".encode())
def test_any_cookie_is_answered_without_a_server_error(served: Served, value: bytes | str) -> None:
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    raw = raw.replace(b"\r", b"").replace(b"\n", b"")  # a header cannot hold a line break
    for path in ("/", "/queues/demo", "/jobs"):
        status, _, body = send(served.board, "GET", path, cookie=raw)
        assert_answered(status, body, f"cookie {raw!r} on {path}")


@pytest.mark.parametrize(
    ("target", "fields", "message"),
    [
        ("/queues/demo?page=%C2%B2", None, "page: '²' is not a whole number"),
        ("/queues/demo?size=%C2%B2", None, "size: '²' is not a whole number"),
        ("/queues/demo?size=30", None, "choose one of 25, 50, 100, 200"),
        ("/dead?requeued=%C2%B2", None, "requeued: '²' is not a whole number"),
        ("/queues/demo/tenant?id=greedy", {"max_running": "²"}, "write it in the digits 0-9"),
        ("/queues/demo/tenant?id=greedy", {"burst": "①"}, "burst: '①' is not a whole number"),
        ("/queues/demo/tenant?id=greedy", {"burst": "3"}, "a burst needs a rate"),
        ("/queues/demo/tenant?id=greedy", {"rate": "١٠٠/s"}, "cannot read rate"),
    ],
)
def test_the_reported_inputs_are_refused_with_a_message(
    served: Served, target: str, fields: dict[str, str] | None, message: str
) -> None:
    if fields is None:
        status, _, body = send(served.board, "GET", target, cookie=served.cookie)
    else:
        form: dict[str, str | bytes] = {"csrf": served.csrf, **VALID[target], **fields}
        form["weight"] = ""  # only the field under test
        status, _, body = send(served.board, "POST", target, form, cookie=served.cookie)
    assert status == 400, body[:2000]
    assert message in body.replace("&#39;", "'")


READS = re.compile(
    r"""(?:query_)?params\.(?:get|getlist)\("(\w+)"|_text\(form, "(\w+)"\)"""
    r"""|form\.getlist\("(\w+)"\)"""
)


def test_inputs_cover_what_the_pages_read() -> None:
    """Every name the dashboard's code reads from a query string or form is in INPUTS."""
    read: set[str] = set()
    for source in (ROOT / "fairq" / "web").glob("*.py"):
        for match in READS.finditer(Path(source).read_text()):
            read.add(next(group for group in match.groups() if group))
    fields_tuple = re.search(r"for key in \(([^)]*)\)", (ROOT / "fairq/web/actions.py").read_text())
    assert fields_tuple is not None
    read.update(re.findall(r'"(\w+)"', fields_tuple.group(1)))
    assert read <= {name for _, _, name in INPUTS}
