"""Without the ``metrics`` and ``otel`` extras, fairq works, and their plug-ins say what to
install. Run in a fresh interpreter where importing those libraries fails as if missing."""

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
        if name.split(".")[0] in ("prometheus_client", "opentelemetry"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
"""


def run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = BLOCK + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def test_the_core_works_without_the_extras(tmp_path: Path) -> None:
    done = run(
        f"""
        import fairq, fairq.instrument, fairq.instrument.logs, fairq.worker, fairq.cli.worker
        from fairq.worker import Worker
        app = fairq.App("sqlite:///{tmp_path / "q.db"}")
        app.job(name="noop", tenant="t")(lambda t: None)
        app.enqueue("noop", ["t1"])
        Worker(app, burst=True).run()
        assert app.stats()[0].succeeded == 1
        print("ok")
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_each_plug_in_names_its_extra(tmp_path: Path) -> None:
    for module, extra in [
        ("fairq.instrument.prometheus", "metrics"),
        ("fairq.instrument.metrics_http", "metrics"),
        ("fairq.instrument.tenant_gauges", "metrics"),
        ("fairq.instrument.otel", "otel"),
    ]:
        done = run(
            f"""
            from fairq import ConfigError
            try:
                import {module}
            except ConfigError as exc:
                print(exc)
            """,
            tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert f"pip install 'fairq[{extra}]'" in done.stdout, (module, done.stdout)


def test_the_worker_command_says_what_to_install_for_metrics(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(
        "import fairq\n"
        f"app = fairq.App('sqlite:///{tmp_path / 'q.db'}')\n"
        "app.job(name='noop', tenant='t')(lambda t: None)\n"
    )
    done = run(
        """
        import sys
        from fairq.cli import main
        sys.argv = ["fairq", "worker", "jobs:app", "--burst", "--metrics-port", "0"]
        main()
        """,
        tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "--metrics-port: Prometheus metrics needs fairq's 'metrics' extra" in done.stderr
    assert "pip install 'fairq[metrics]'" in done.stderr
