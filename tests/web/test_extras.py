"""Without the ``web`` extra fairq works and ``fairq dashboard`` names what to install; without
``metrics`` the dashboard's ``/metrics`` says the same. Fresh interpreters where importing
those libraries fails as if they were missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BLOCK = """
import importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {missing!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Missing())
"""


def run(missing: tuple[str, ...], code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = BLOCK.format(missing=missing) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def test_without_the_web_extra_the_command_names_it(tmp_path: Path) -> None:
    done = run(
        ("starlette", "uvicorn", "jinja2"),
        f"""
        import sys
        from fairq.cli import main
        import fairq
        fairq.App("sqlite:///{tmp_path / "q.db"}").stats()
        sys.argv = ["fairq", "dashboard", "--url", "sqlite:///{tmp_path / "q.db"}"]
        main()
        """,
        tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert "the dashboard needs its extra: pip install 'fairq[web]'" in done.stderr


def test_without_the_metrics_extra_metrics_names_it(tmp_path: Path) -> None:
    done = run(
        ("prometheus_client",),
        f"""
        import asyncio
        from starlette.requests import Request
        import fairq
        from fairq.web.server import metrics_routes

        (route,) = metrics_routes(fairq.App("sqlite:///{tmp_path / "q.db"}"))
        scope = {{"type": "http", "method": "GET", "path": "/metrics", "headers": []}}
        response = asyncio.run(route.endpoint(Request(scope)))
        print(response.status_code, response.body.decode())
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("501 ")
    assert "pip install 'fairq[metrics]'" in done.stdout
