"""docs/tutorial.md's code (step 2), run as it stands in a fresh directory, before any worker
runs: a new user pastes it first, so nothing in it may wait for a worker (it once ended in
``app.result(…, timeout=60)``, a minute's wait and a ResultTimeout)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from fairq import App

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial.md"


def using_it_blocks() -> tuple[str, str]:
    """Step 2's first two Python blocks: myapp/jobs.py, and the calls that use it."""
    text = TUTORIAL.read_text("utf-8")
    section = text[text.index("## 2. Declare jobs") :]
    jobs, calls = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    assert jobs.startswith("# myapp/jobs.py")
    return jobs, calls


def test_the_tutorials_code_runs_before_any_worker(tmp_path: Path) -> None:
    jobs, calls = using_it_blocks()
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "jobs.py").write_text(jobs)
    (tmp_path / "calls.py").write_text(
        "from myapp.jobs import app, build_report, import_csv\n\n" + calls
    )
    url = f"sqlite:///{tmp_path / 'fairq.db'}"
    done = subprocess.run(
        [sys.executable, "calls.py"], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, check=False, env={**os.environ, "FAIRQ_URL": url},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    app = App(url)
    try:
        rows = {(r.queue, r.tenant): r for r in app.stats()}
        assert rows[("imports", "42")].weight == 3
        assert rows[("reports", "acme")].ready == 1  # the report waits for a worker
        assert all(r.running == 0 for r in rows.values())
    finally:
        app.close()
