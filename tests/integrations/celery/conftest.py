"""Real Celery workers and ``fairq relay`` processes on a fairq store of each kind.

Broker: Redis at ``$FAIRQ_TEST_BROKER_URL``, or RabbitMQ at ``$FAIRQ_TEST_AMQP_URL``
(``rabbit_setup``); each test uses a queue of its own and deletes it after (the broker is never
flushed: others may share it). fairq store: SQLite in the
test's directory, Redis at ``$FAIRQ_TEST_REDIS_URL`` under a prefix of its own, or PostgreSQL in
a schema of its own; each is removed after the test.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
import redis

from fairq import App, JobInfo, JobState

from .. import amqp
from .proj import Project, build

ROOT = Path(__file__).resolve().parents[3]
PROJECT = "tests.integrations.celery.proj"
DEADLINE = 60.0  # only so a broken run fails a test instead of hanging it
T = TypeVar("T")


def broker_url() -> str:
    return os.environ.get("FAIRQ_TEST_BROKER_URL", "redis://127.0.0.1:6379/10")


def wait_for(condition: Callable[[], T], what: str, timeout: float = DEADLINE) -> T:
    """Poll ``condition`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def wait_done(app: App, ids: list[str], state: JobState = JobState.SUCCEEDED) -> None:
    """Wait until every job of ``ids`` has ended (succeeded, dead or cancelled); each must be
    ``state``."""
    ended = (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED)

    def infos() -> list[JobInfo] | None:
        found = [app.job_info(job_id) for job_id in ids]
        if all(info is not None and info.state in ended for info in found):
            return [info for info in found if info is not None]
        return None

    for info in wait_for(infos, f"{len(ids)} jobs to end"):
        assert info.state is state, info


@dataclass
class Process:
    """A worker or relay started by a test, in a session (process group) of its own."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def released(self) -> list[str]:
        """The ids of the jobs a relay started at ``debug`` released, in the order it did."""
        return re.findall(r"released job (\S+)", self.log())

    def wait_log(self, text: str, count: int = 1) -> None:
        wait_for(
            lambda: self.log().count(text) >= count or self.process.poll() is not None,
            f"{text!r} in the log of {self.name}",
        )
        if self.log().count(text) < count:
            raise AssertionError(f"{self.name} exited; its log:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL the process and its children (a prefork pool's)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class Setup:
    """One test's store, broker queue, run log, its own Project, and the processes it ran."""

    url: str
    broker: str
    queue: str
    workdir: Path
    project: Project
    started: list[Process] = field(default_factory=list)

    @property
    def log(self) -> str:
        return str(self.workdir / "runs.log")

    def gate(self, name: str = "go") -> str:
        return str(self.workdir / name)

    def open(self, gate: str) -> None:
        Path(gate).touch()

    def runs(self) -> list[tuple[str, str, str]]:
        """(start|end, tenant, tag) per line of the run log, in order."""
        path = Path(self.log)
        if not path.exists():
            return []
        return [
            (parts[0], parts[1], parts[2])
            for parts in (line.split() for line in path.read_text().splitlines())
        ]

    def started_tags(self) -> list[str]:
        return [tag for what, _, tag in self.runs() if what == "start"]

    def _start(
        self, name: str, command: list[str], cwd: Path = ROOT, broker: str | None = None
    ) -> Process:
        env = {**os.environ, "FAIRQ_URL": self.url, "CELERY_BROKER_URL": broker or self.broker}
        env["FAIRQ_TEST_QUEUE"] = self.queue
        log_path = self.workdir / f"{name}.log"
        with open(log_path, "wb") as out:
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started = Process(name, process, log_path)
        self.started.append(started)
        return started

    def worker(
        self, concurrency: int = 1, *, wait: bool = False, broker: str | None = None
    ) -> Process:
        """A Celery worker with a prefork pool of ``concurrency`` on the test's queue (through
        ``broker``, else the test's). Not waited for unless ``wait``: messages wait in the
        broker until it is ready, and a relay starts meanwhile."""
        name = f"worker{len(self.started)}"
        worker = self._start(
            name,
            [
                sys.executable, "-m", "celery", "-A", PROJECT, "worker",
                "--pool", "prefork", "--concurrency", str(concurrency),
                "--queues", self.queue, "--hostname", f"{name}-{self.queue}@%h",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--loglevel", "INFO",
            ],
            broker=broker,
        )  # fmt: skip
        if wait:
            worker.wait_log("ready.")
        return worker

    def relay(self, *args: str, log_level: str = "info") -> Process:
        """``fairq relay`` of the test's queue (at ``debug``, its log names each job it
        releases, in order: ``released()``)."""
        relay = self._start(
            f"relay{len(self.started)}",
            [
                sys.executable, "-m", "fairq", "--log-level", log_level, "relay",
                f"{PROJECT}:fair", "--queue", self.queue, *args,
            ],
        )  # fmt: skip
        relay.wait_log("releasing queues")
        return relay


def _sqlite(tmp: Path) -> tuple[str, Callable[[], None]]:
    return f"sqlite:///{tmp / 'fairq.db'}", lambda: None


def _redis(tmp: Path) -> tuple[str, Callable[[], None]]:
    server = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    prefix = f"cel{uuid.uuid4().hex[:8]}"

    def drop() -> None:
        client = redis.Redis.from_url(server)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()

    return f"{server}?prefix={prefix}", drop


def _postgres(tmp: Path) -> tuple[str, Callable[[], None]]:
    from postgres._store import open_disposable, server_url, with_option

    backend = open_disposable(clock="store")  # an empty schema, given back when closed
    return with_option(server_url(), "schema", backend.schema), backend.close


STORES = {"sqlite": _sqlite, "redis": _redis, "postgres": _postgres}


def make_setup(kind: str, tmp_path: Path, broker: str | None = None) -> Iterator[Setup]:
    url, drop = STORES[kind](tmp_path)
    queue = f"fq-{uuid.uuid4().hex[:10]}"
    broker = broker or broker_url()
    setup = Setup(url, broker, queue, tmp_path, build(url, broker, queue))
    try:
        yield setup
    finally:
        for process in setup.started:
            process.kill()
            print(f"--- {process.name}\n{process.log()}")  # shown when the test failed
        setup.project.fair.app.close()
        setup.project.celery.close()  # its broker connections
        if broker.startswith("amqp"):
            amqp.drop([queue, f"{queue}-slow"])
        else:
            client = redis.Redis.from_url(setup.broker)
            client.delete(queue, f"{queue}-slow")
            client.close()
        drop()


@pytest.fixture(params=list(STORES))
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    """A setup on each kind of store."""
    yield from make_setup(str(request.param), tmp_path)


@pytest.fixture
def sqlite_setup(tmp_path: Path) -> Iterator[Setup]:
    yield from make_setup("sqlite", tmp_path)


@pytest.fixture
def redis_setup(tmp_path: Path) -> Iterator[Setup]:
    yield from make_setup("redis", tmp_path)


@pytest.fixture
def postgres_setup(tmp_path: Path) -> Iterator[Setup]:
    yield from make_setup("postgres", tmp_path)


@pytest.fixture
def rabbit_setup(tmp_path: Path) -> Iterator[Setup]:
    """A Redis store and a RabbitMQ broker (``$FAIRQ_TEST_AMQP_URL``)."""
    amqp.connect().release()  # fails at once, naming the URL, when RabbitMQ does not answer
    yield from make_setup("redis", tmp_path, amqp.AMQP_URL)
