"""The stores the conformance suite runs against: one entry per kind in ``BACKENDS``.

To add a store, add one factory here. A factory opens a fresh, empty store in ``tmp`` (a new
directory per call); servers come from environment variables with local defaults. A store whose
server cannot be reached must make its tests FAIL (let the factory raise), never skip.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fairq.contract import Backend

BackendFactory = Callable[[Path], Backend]


def _model(tmp: Path) -> Backend:
    from fairq.model import ReferenceModel

    return ReferenceModel()


def _sqlite(tmp: Path) -> Backend:
    from fairq.backends.clock import Clock
    from fairq.backends.sqlite import SQLiteBackend

    return SQLiteBackend(tmp / "q.db", clock=Clock.CALLER)


def _redis(tmp: Path) -> Backend:
    """A fresh prefix per store; the test's first store empties the test database first.
    ``clock=caller``: the suite's virtual clock, not the server's, stamps every event.

    The URL is ``$FAIRQ_TEST_REDIS_URL`` (default database 9); unreachable fails, never skips.
    """
    import os
    import uuid

    from fairq.backends.redis import RedisBackend

    url = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    backend = RedisBackend.from_url(f"{url}?prefix=t{uuid.uuid4().hex[:8]}&clock=caller")
    if tmp.name == "store0":
        backend.client.flushdb()
    return backend


def _redis_cluster(tmp: Path) -> Backend:
    """A fresh prefix per store on a real local Redis Cluster (three masters with a replica
    each, started once per test run: tests/redis_cluster/servers.py); the test's first store
    empties every master first. ``clock=caller``, as for "redis"."""
    import uuid

    from redis_cluster.servers import shared

    from fairq.backends.redis import RedisBackend

    url = shared().url
    backend = RedisBackend.from_url(f"{url}&prefix=t{uuid.uuid4().hex[:8]}&clock=caller")
    if tmp.name == "store0":
        backend.client.flushall()
    return backend


def _postgres(tmp: Path) -> Backend:
    """A fresh schema per store, dropped when it is closed (tests/postgres/_store.py).

    The server is ``$FAIRQ_TEST_POSTGRES_URL``; unreachable fails, never skips. The scenarios
    run on a virtual clock, so the store keeps every ``now`` given (``?clock=caller``).
    """
    from postgres._store import open_disposable

    return open_disposable(clock="caller")


BACKENDS: dict[str, BackendFactory] = {
    "model": _model,
    "sqlite": _sqlite,
    "redis": _redis,
    "redis-cluster": _redis_cluster,
    "postgres": _postgres,
}


@pytest.fixture(params=list(BACKENDS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_backend(kind: str, tmp_path: Path) -> Iterator[Callable[[], Backend]]:
    """Opens fresh, independent stores of the kind under test; all are closed afterwards."""
    opened: list[Backend] = []
    numbers = itertools.count()

    def make() -> Backend:
        directory = tmp_path / f"store{next(numbers)}"
        directory.mkdir()
        backend = BACKENDS[kind](directory)
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        backend.close()


@pytest.fixture
def backend(make_backend: Callable[[], Backend]) -> Backend:
    return make_backend()
