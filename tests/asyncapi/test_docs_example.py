"""docs/async.md's example, run as it stands (``python reports.py``) on Redis and PostgreSQL:
it enqueues a job, reads it back, sets the tenant's weight and closes the App in its loop."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairq import App, JobState

DOC = Path(__file__).resolve().parents[2] / "docs" / "async.md"


def snippet() -> str:
    found = re.search(r"```python\n(# reports\.py.*?)```", DOC.read_text("utf-8"), re.S)
    assert found is not None, "docs/async.md has no `# reports.py` block"
    return found.group(1)


@pytest.fixture(params=["redis", "postgres"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "redis":
        base = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
        yield f"{base}?prefix=a{uuid.uuid4().hex[:8]}"
    else:
        from postgres._store import drop_schema, fresh_schema, server_url, with_option

        schema = fresh_schema()
        yield with_option(server_url(), "schema", schema)
        drop_schema(schema)


def test_the_docs_example_runs_as_it_stands(tmp_path: Path, url: str) -> None:
    (tmp_path / "reports.py").write_text(snippet())
    done = subprocess.run(
        [sys.executable, "reports.py"], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, check=False, env={**os.environ, "FAIRQ_URL": url},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    app = App(url)
    try:
        info = app.job_info(job_id)
        assert info is not None and info.state is JobState.READY
        assert (info.name, info.queue, info.tenant) == ("__main__.render_report", "reports", "acme")
        (row,) = app.stats(queue="reports")
        assert row.weight == 3
    finally:
        app.close()
