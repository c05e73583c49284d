from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._store import DisposableBackend, open_disposable


@pytest.fixture
def pg() -> Iterator[DisposableBackend]:
    backend = open_disposable()
    yield backend
    backend.close()
