"""Apps over every store for the async API's scenarios: the reference model, SQLite, Redis and
PostgreSQL, each opened by the conformance suite's factories (tests/conformance/conftest.py),
so the async path meets the same fresh, isolated stores as the contract's scenarios.

Each test runs its scenario with ``run(app, scenario)``: one event loop, the App's async store
opened in it on the first call and closed (``aclose``, which closes the blocking store too) at
its end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from conformance.conftest import BACKENDS

from fairq import App

T = TypeVar("T")
NOW = 1_000_000.0
KINDS = list(BACKENDS)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_app(kind: str, tmp_path: Path) -> Iterator[Callable[..., App]]:
    """Apps over one fresh store of the kind under test (a second App plays another
    process); the store is closed afterwards."""
    made: list[App] = []
    stores: list[Any] = []

    def make(**options: Any) -> App:
        if not stores:
            directory = tmp_path / "store0"
            directory.mkdir()
            stores.append(BACKENDS[kind](directory))
        options.setdefault("clock", lambda: NOW)
        app = App("memory://", backend=stores[0], **options)
        made.append(app)
        return app

    yield make
    if stores:
        stores[0].close()


def run(app: App, scenario: Callable[[], Awaitable[T]]) -> T:
    """``scenario`` in a new event loop; the App's async store closed at its end (its
    blocking store stays open for the fixture to close)."""

    async def main() -> T:
        try:
            return await scenario()
        finally:
            await app.aclose(blocking=False)

    return asyncio.run(main())
