"""docs/cancellation.md's ``rebuild`` example, run as it stands with a real worker process on
every store: cancelled while it runs, it ends ``cancelled``. Its ten one-second parts end well
before the worker's first heartbeat (a third of the default 60 s lease), so the request must
come from the worker's once-a-second look at its running jobs (fairq/worker/cancels.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fairq import CancelOutcome, JobInfo, JobState

from .helpers import job, wait_for, wait_state
from .store_urls import KINDS, fresh_url

DOC = Path(__file__).resolve().parents[2] / "docs" / "cancellation.md"
ENDED = (JobState.SUCCEEDED, JobState.CANCELLED, JobState.DEAD)

pytestmark = pytest.mark.processes


def rebuild_snippet() -> str:
    found = re.search(r"```python\n(# reports\.py\n.*?)```", DOC.read_text("utf-8"), re.S)
    assert found is not None, "docs/cancellation.md has no `# reports.py` block"
    return found.group(1)


def load(source: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The module as the worker imports it (the job names come from it: reports.rebuild)."""
    spec = importlib.util.spec_from_file_location("reports", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "reports", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", KINDS)
def test_the_docs_rebuild_example_ends_cancelled(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "reports.py").write_text(rebuild_snippet())
    log_path = tmp_path / "worker.log"
    with fresh_url(kind, tmp_path) as url:
        monkeypatch.setenv("FAIRQ_URL", url)
        reports = load(tmp_path / "reports.py", monkeypatch)
        with log_path.open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "fairq", "worker", "reports:app"],
                cwd=tmp_path, env=os.environ, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            job_id = reports.rebuild.enqueue("acme")
            wait_state(reports.app, job_id, JobState.RUNNING)
            assert reports.app.cancel(job_id) is CancelOutcome.REQUESTED

            def ended() -> JobInfo | None:
                info = job(reports.app, job_id)
                return info if info.state in ENDED else None

            info = wait_for(ended, "the job to end")
            assert info.state is JobState.CANCELLED, log_path.read_text()
            assert (info.last_error or "").startswith("cancelled on request (JobCancelled: ")
            assert info.attempts == 1
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0, log_path.read_text()
            reports.app.close()
