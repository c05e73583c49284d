"""Admin commands run through click's CliRunner against a real SQLite file per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_store import Store

from fairq.demo.jobs import make_app


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.delenv("FAIRQ_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'fairq.db'}"
    app = make_app(url)
    app.publish()
    yield Store(url=url, app=app)
    app.close()
