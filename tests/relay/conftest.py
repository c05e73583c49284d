"""The relay core on every server store, with an in-process peer: a queue and its threads.

The peer here is the smallest real one: ``publish`` puts the job on a ``queue.Queue`` (the
"broker") and worker threads run it between ``RelayedRuns.begin`` and ``succeeded``/``failed``,
exactly as the Celery, RQ and Dramatiq integrations do inside their workers (their own tests,
tests/integrations/, run those peers' real worker processes).
"""

from __future__ import annotations

import os
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fairq import App
from fairq.contract import Backend
from fairq.job import Lease, decode_payload
from fairq.relay import Relay, RelayedRuns, UnknownTask, ticket_of


def _sqlite(tmp: Path) -> tuple[str, Backend | None]:
    return f"sqlite:///{tmp / 'q.db'}", None


def _redis(tmp: Path) -> tuple[str, Backend | None]:
    url = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    return f"{url}?prefix=r{uuid.uuid4().hex[:8]}", None


def _postgres(tmp: Path) -> tuple[str, Backend | None]:
    from postgres._store import open_disposable

    backend = open_disposable(clock="store")
    return "postgresql://unused", backend


STORES: dict[str, Callable[[Path], tuple[str, Backend | None]]] = {
    "sqlite": _sqlite,
    "redis": _redis,
    "postgres": _postgres,
}


@pytest.fixture(params=list(STORES))
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    url, backend = STORES[request.param](tmp_path)
    made = App(url, backend=backend)
    yield made
    made.close()


@dataclass
class Peer:
    """A broker (a queue) and ``slots`` worker threads running what the relay publishes."""

    app: App
    slots: int = 1
    broken: Callable[[Lease], bool] = lambda lease: False  # raise as a broker that is down
    known: Callable[[str], bool] = lambda name: True
    broker: queue.Queue[Lease | None] = field(default_factory=queue.Queue)
    released: list[Lease] = field(default_factory=list)  # in the order the relay published
    started: list[Lease] = field(default_factory=list)  # in start order
    skipped: list[Lease] = field(default_factory=list)
    running: int = 0
    most_running: int = 0
    published: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    gate: threading.Event | None = None  # when set: jobs wait for it before they end

    def __post_init__(self) -> None:
        self.runs = RelayedRuns(self.app)
        self.threads = [
            threading.Thread(target=self._serve, daemon=True) for _ in range(self.slots)
        ]
        for thread in self.threads:
            thread.start()

    # -- the Publisher protocol --

    def publish(self, lease: Lease) -> None:
        if not self.known(lease.name):
            raise UnknownTask(f"no task named {lease.name!r} in this peer")
        if self.broken(lease):
            raise ConnectionError("broker unreachable")
        with self.lock:
            self.published += 1
            self.released.append(lease)
        self.broker.put(lease)

    def backlog_age(self, queue: str) -> float | None:
        return None

    def backlog_size(self, queue: str) -> int | None:
        return None

    # -- the worker threads --

    def _serve(self) -> None:
        while (lease := self.broker.get()) is not None:
            run = self.runs.begin(ticket_of(lease))
            if run is None:
                with self.lock:
                    self.skipped.append(lease)
                continue
            with self.lock:
                self.running += 1
                self.most_running = max(self.most_running, self.running)
                self.started.append(lease)
            error: BaseException | None = None
            try:
                if self.gate is not None:
                    self.gate.wait(30)
                args, kwargs = decode_payload(lease.payload)
                self.app.jobs[lease.name](*args, **kwargs)
            except Exception as exc:
                error = exc
            with self.lock:
                self.running -= 1
            if error is None:
                run.succeeded()
            else:
                run.failed(error)

    def close(self) -> None:
        for _ in self.threads:
            self.broker.put(None)
        for thread in self.threads:
            thread.join(10)
        self.runs.close()


@dataclass
class Running:
    relay: Relay
    thread: threading.Thread

    def stop(self) -> None:
        self.relay.stop()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the relay did not stop"


def start_relay(app: App, peer: Peer, queues: list[str], **options: Any) -> Running:
    relay = Relay(app.backend, peer, queues, **options)
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    assert relay.started.wait(10), "the relay did not start"
    return Running(relay, thread)
