"""Fixtures for the SQLite backend's own tests (the shared rules are in tests/conformance)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fairq.backends.clock import Clock
from fairq.backends.sqlite import SQLiteBackend


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "fairq.db"


@pytest.fixture
def backend(db_path: Path) -> Iterator[SQLiteBackend]:
    opened = SQLiteBackend(db_path, clock=Clock.CALLER)  # tests here run on a virtual clock
    yield opened
    opened.close()
