"""The plug-in example of docs/observability.md runs as shown, on a real worker."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fairq import JobState
from fairq.worker import Worker

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def test_the_documented_plug_in_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = DOC.read_text().split("### Writing your own", 1)[1].split("## The job log", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    monkeypatch.chdir(tmp_path)  # its App's store: fairq.db in the working directory
    scope: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), scope)
    app = scope["app"]

    @app.job(name="fails", tenant="shop", max_attempts=1)
    def fails(shop: str) -> None:
        raise ValueError("out of stock")

    job_id = fails.enqueue("acme")
    Worker(app, burst=True).run()
    info = app.job_info(job_id)
    assert info is not None and info.state is JobState.DEAD
    (plugin,) = [m for m in app.middleware if type(m).__name__ == "SlowAndDead"]
    assert plugin.dead == {"acme": 1}
    app.close()
