"""docs/frameworks.md's Flask snippet, run as it stands: imported as a module (its App on a
fresh SQLite store), driven with Flask's test client."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from fairq import JobState

DOC = Path(__file__).resolve().parents[2] / "docs" / "frameworks.md"


def flask_snippet() -> str:
    text = DOC.read_text("utf-8")
    section = text[text.index("## Flask") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "docs/frameworks.md has no Python block under ## Flask"
    return found.group(1)


def test_flask_snippet_enqueues_and_answers_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "flask_snippet.py"
    source.write_text(flask_snippet())
    monkeypatch.setenv("FAIRQ_URL", f"sqlite:///{tmp_path}/jobs.db")
    spec = importlib.util.spec_from_file_location("flask_snippet", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "flask_snippet", module)
    spec.loader.exec_module(module)
    try:
        client = module.web.test_client()
        asked = client.post("/exports", json={"account": "acme", "table": "orders"})
        assert asked.status_code == 202
        job_id = asked.get_json()["job"]
        assert client.get(f"/jobs/{job_id}").get_json() == {"state": "ready", "tenant": "acme"}
        info = module.fq.job_info(job_id)
        assert info is not None and info.state is JobState.READY and info.queue == "exports"
        bad = client.post("/exports", json={"account": None, "table": "orders"})
        assert bad.status_code == 400 and "tenant" in bad.get_json()["error"]
        assert client.get("/jobs/nope").status_code == 404
    finally:
        module.fq.close()
