"""The FastAPI example (examples/fastapi/main.py), run: its endpoints enqueue, read and tune
with fairq's async API against a real Redis and a real PostgreSQL store, then a real worker
process (``fairq worker main:fq --burst``) runs the jobs and the service reports them done."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient
from postgres._store import drop_schema, fresh_schema, server_url

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fastapi"
REDIS_URL = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")


@pytest.fixture(params=["redis", "postgres"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh store: a key prefix of its own, or a schema of its own (removed after)."""
    if request.param == "redis":
        prefix = f"fx{uuid.uuid4().hex[:8]}"
        yield f"{REDIS_URL}?prefix={prefix}"
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
        client.close()
    else:
        schema = fresh_schema()
        yield f"{server_url()}?schema={schema}"
        with contextlib.suppress(psycopg.Error):
            drop_schema(schema)


@pytest.fixture
def example(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """examples/fastapi/main.py imported against ``store_url`` (a module of its own per test:
    its App reads the URL at import)."""
    monkeypatch.setenv("FAIRQ_URL", store_url)
    monkeypatch.setenv("REPORTS_DIR", str(tmp_path / "reports"))
    spec = importlib.util.spec_from_file_location(f"fastapi_example_{uuid.uuid4().hex}",
                                                  EXAMPLE / "main.py")  # fmt: skip
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    module.fq.close()


def test_service_enqueues_and_a_worker_runs_the_jobs(example: ModuleType, tmp_path: Path) -> None:
    with TestClient(example.api) as client:
        acme = client.post("/reports", json={"account": "acme", "report": "q3"})
        globex = client.post("/reports", json={"account": "globex", "report": "q4"})
        assert acme.status_code == globex.status_code == 200, (acme.text, globex.text)
        job = acme.json()["job"]
        assert client.get(f"/jobs/{job}").json() == {"state": "ready", "tenant": "acme",
                                                       "attempts": 0}  # fmt: skip
        assert client.get("/tenants/acme").json() == [
            {"queue": "reports", "ready": 1, "running": 0, "weight": 1.0}
        ]
        weighed = client.put("/tenants/acme/weight", params={"weight": 3})
        assert weighed.json() == {"tenant": "acme", "weight": 3.0}

        bad = client.post("/reports", json={"account": ["not", "an", "id"], "report": "q"})
        assert bad.status_code == 400 and "tenant" in bad.json()["error"]
        assert client.get("/jobs/nope").status_code == 404

        worker = subprocess.run(
            [sys.executable, "-m", "fairq", "worker", "main:fq", "--burst"],
            cwd=EXAMPLE,
            env={**os.environ, "PYTHONPATH": str(EXAMPLE)},
            capture_output=True,
            timeout=60,
        )
        assert worker.returncode == 0, worker.stderr.decode()[-2000:]
        assert client.get(f"/jobs/{job}").json()["state"] == "succeeded"
        assert client.get(f"/jobs/{globex.json()['job']}").json()["state"] == "succeeded"
    reports = tmp_path / "reports"
    assert (reports / "acme-q3.txt").read_text() == "report q3 of acme\n"
    assert (reports / "globex-q4.txt").exists()
