"""What a new user hits first (issue #17 part 5): each ends in one clear line, never a
traceback, and nothing is left behind that the user did not ask for."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import click.testing
import psycopg
import pytest
import redis

import fairq.cli.admin
import fairq.cli.demo  # noqa: F401
from fairq import App
from fairq.cli import cli
from fairq.demo.jobs import NOOP, make_app
from fairq.demo.namespace import demo_namespace

REDIS_URL = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
ROOT = Path(__file__).resolve().parents[2]


def server_url() -> str:
    return os.environ.get("FAIRQ_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def fairq_command(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "fairq", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **(env or {})}, cwd=cwd,
    )  # fmt: skip


# -- a store URL without its extra -----------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "url", "extra"),
    [
        ("redis", REDIS_URL, "redis"),
        ("psycopg", server_url(), "postgres"),
        ("psycopg_pool", server_url(), "postgres"),
    ],
    ids=["redis", "psycopg", "psycopg_pool"],
)
@pytest.mark.parametrize("command", [["stats"], ["worker", "fairq.demo.jobs:app", "--burst"]])
def test_a_server_url_without_its_extra_names_the_pip_install(
    tmp_path: Path, module: str, url: str, extra: str, command: list[str]
) -> None:
    # the client library is made unimportable, as when the extra is not installed
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nsys.modules[{module!r}] = None\n")
    done = fairq_command(*command, "--url", url, env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode != 0
    assert f"pip install 'fairq[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_migrate_without_the_postgres_extra_names_the_pip_install(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['psycopg'] = None\n")
    done = fairq_command("migrate", "--url", server_url(), env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode != 0
    assert "pip install 'fairq[postgres]'" in done.stderr
    assert "Traceback" not in done.stderr


# -- a store that cannot be reached ------------------------------------------------------------


UNREACHABLE = [
    ("redis://127.0.0.1:1/0", "cannot reach Redis"),
    (f"{REDIS_URL.rsplit('/', 1)[0]}/99", "has no database 99"),
    ("postgresql://postgres@127.0.0.1:1/test", "cannot reach the PostgreSQL store"),
]


@pytest.mark.parametrize(("url", "message"), UNREACHABLE)
@pytest.mark.parametrize(
    "command",
    [["worker", "fairq.demo.jobs:app"], ["stats"], ["enqueue", NOOP, "--tenant", "a"]],
    ids=lambda c: c[0],
)
def test_an_unreachable_store_is_one_clear_line(url: str, message: str, command: list[str]) -> None:
    done = fairq_command(*command, "--url", url)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if message in line]
    assert len(errors) == 1, done.stderr


# -- a typo in a store URL's query ----------------------------------------------------------------

TYPOS = [
    (f"{REDIS_URL}?prefx=x", "'prefx'", "(did you mean 'prefix'?); known: fairq's prefix,"),
    (f"{server_url()}?shema=x", "'shema'", "(did you mean 'schema'?); known: fairq's schema,"),
    ("sqlite:///fairq.db?foo=1", "'foo'", "this store's URL takes no parameters"),
]


@pytest.mark.parametrize(("url", "name", "known"), TYPOS, ids=["redis", "postgresql", "sqlite"])
@pytest.mark.parametrize(
    "command",
    [["worker", "fairq.demo.jobs:app", "--burst"], ["stats"], ["enqueue", NOOP, "--tenant", "a"]],
    ids=lambda c: c[0],
)
def test_a_typo_in_a_store_urls_query_is_one_line_naming_it_and_the_known_ones(
    tmp_path: Path, url: str, name: str, known: str, command: list[str]
) -> None:
    done = fairq_command(*command, "--url", url, cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if f"unknown parameter {name}" in line]
    assert len(errors) == 1, done.stderr
    assert known in errors[0]
    assert list(tmp_path.iterdir()) == []  # no file named fairq.db?foo=1


# -- enqueue, tenants ----------------------------------------------------------------------------


def test_enqueue_without_a_tenant_names_the_option(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    app = make_app(url)
    app.publish()
    app.close()
    result = click.testing.CliRunner().invoke(cli, ["enqueue", NOOP, "--url", url])
    assert result.exit_code == 2
    assert "--tenant" in result.stderr
    assert "tenant=" not in result.stderr


# -- read-only commands never create a store ---------------------------------------------------


@pytest.mark.parametrize(
    "command", [["stats"], ["dead", "list"], ["dead", "requeue", "--all"], ["tenants", "q"]]
)
def test_a_read_in_a_directory_without_a_store_creates_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FAIRQ_URL", raising=False)
    result = click.testing.CliRunner().invoke(cli, command, catch_exceptions=False)
    assert result.exit_code == 1
    assert "no fairq store at sqlite:///fairq.db" in result.stderr
    assert "--url" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_sqlite_file_is_named_by_its_own_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An absolute path is not "in" the working directory; a relative one is shown resolved."""
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "jobs.db"
    for url, path in [(f"sqlite:///{elsewhere}", elsewhere), ("sqlite:///x.db", tmp_path / "x.db")]:
        result = click.testing.CliRunner().invoke(cli, ["stats", "--url", url])
        assert result.exit_code == 1
        assert f"no fairq store at {url} (no such file: {path});" in result.stderr
    assert list(tmp_path.iterdir()) == []


# -- the demo's namespace ------------------------------------------------------------------------


def _redis_keys(prefix: str) -> list[bytes]:
    """The keys under ``prefix``, but for the reply key of a call still under way when the
    namespace went (a worker's waiting dequeue, answered after its last read): such a key
    expires on its own, which is checked here."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        found = list(client.scan_iter(match=f"{prefix}*"))
        replies = [key for key in found if b":reply:" in key]
        assert all(client.pttl(key) > 0 for key in replies), replies
        return [key for key in found if key not in replies]
    finally:
        client.close()


def _pg_schemas(like: str) -> list[str]:
    with psycopg.connect(server_url()) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", [like])
        return [r[0] for r in rows]


@pytest.fixture
def user_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The user's own store, holding a job of theirs, which the demo must not touch."""
    kind = request.param
    tag = uuid.uuid4().hex[:8]
    url = {
        "sqlite": f"sqlite:///{tmp_path / 'mine.db'}",
        "redis": f"{REDIS_URL}?prefix=mine{tag}",
        "postgresql": f"{server_url()}?schema=mine_{tag}",
    }[kind]
    yield url
    if kind == "postgresql":
        with psycopg.connect(server_url(), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS mine_{tag} CASCADE")


def _leftovers(url: str) -> list[object]:
    if url.startswith("sqlite"):
        return [p.name for p in Path(url[len("sqlite:///") :]).parent.iterdir() if "demo" in p.name]
    if url.startswith("redis"):
        return list(_redis_keys("fairq-demo-"))
    return list(_pg_schemas("fairq_demo_%"))


@pytest.mark.parametrize("user_store", ["sqlite", "redis", "postgresql"], indirect=True)
def test_the_demo_namespace_is_removed_even_on_ctrl_c(user_store: str) -> None:
    mine = App(user_store)
    mine.set_tenant("q", "me", weight=2)
    before = mine.stats()
    with pytest.raises(KeyboardInterrupt), demo_namespace(user_store) as own:
        assert own != user_store
        demo = make_app(own)
        demo.jobs[NOOP].options(tenant="t").enqueue()
        assert demo.stats()[0].ready == 1
        demo.close()
        assert _leftovers(user_store)
        raise KeyboardInterrupt
    assert _leftovers(user_store) == []
    assert mine.stats() == before
    mine.close()


@pytest.mark.processes
@pytest.mark.parametrize("user_store", ["redis", "postgresql"], indirect=True)
def test_fairq_demo_on_a_users_server_leaves_nothing_there(user_store: str) -> None:
    done = fairq_command(
        "demo", "--jobs", "40", "--small", "2", "--per-small", "2", "--job-ms", "0",
        "--json", "--url", user_store,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "fairq-demo-" in done.stderr or "fairq_demo_" in done.stderr
    assert _leftovers(user_store) == []


# -- ./dev ---------------------------------------------------------------------------------------


def test_dev_help_shows_only_the_help_text() -> None:
    done = subprocess.run([str(ROOT / "dev"), "help"], capture_output=True, text=True, check=True)
    assert "./dev test" in done.stdout
    assert "set -" not in done.stdout
