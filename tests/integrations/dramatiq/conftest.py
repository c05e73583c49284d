"""Real ``dramatiq`` workers and ``fairq relay`` processes on a real Redis broker (or RabbitMQ:
``rabbit_harness``), with the fairq store on SQLite, Redis or PostgreSQL.

Each test gets a broker namespace of its own in ``$FAIRQ_TEST_BROKER_URL`` (its keys are
deleted afterwards; the database is never flushed), or queues of its own in RabbitMQ at
``$FAIRQ_TEST_AMQP_URL`` (deleted afterwards), and a fresh store: a SQLite file, a key
prefix in ``$FAIRQ_TEST_REDIS_URL``, or an empty schema in ``$FAIRQ_TEST_POSTGRES_URL``
(emptied or dropped afterwards: tests/postgres/_store.py). A server that cannot be reached
fails the tests, never skips them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from dramatiq_tasks import QUEUE, Actors, build, queue
from integrations import amqp

from fairq.job import JobInfo, JobState

HERE = Path(__file__).resolve().parent
BROKER_URL = os.environ.get("FAIRQ_TEST_BROKER_URL", "redis://127.0.0.1:6379/10")
REDIS_URL = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
POSTGRES_URL = os.environ.get(
    "FAIRQ_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
DEADLINE = 60.0

pytestmark = pytest.mark.processes


def wait_for(condition: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


@dataclass
class Process:
    """A worker or relay started by a test, in a session of its own (so killing it kills
    its children too); its output goes to a file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def released(self) -> list[str]:
        """The ids of the jobs a relay started at ``debug`` released, in the order it did."""
        return re.findall(r"released job (\S+)", self.log())

    def kill(self) -> None:
        """SIGKILL the process and its children: nothing gets to clean up."""
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()


@dataclass(frozen=True)
class Record:
    event: str
    tenant: str
    n: int
    pid: int


@dataclass
class Harness:
    """One test's broker namespace, store, in-process actors (to send jobs), and processes."""

    store_url: str
    namespace: str
    workdir: Path
    actors: Actors
    started: list[Process] = field(default_factory=list)
    broker_url: str = BROKER_URL
    extra_queues: list[str] = field(default_factory=list)  # made by a test: dropped after

    def queue(self, name: str = QUEUE) -> str:
        """The broker's name of the test's queue ``name`` (``dramatiq_tasks.queue``)."""
        return queue(name, self.broker_url, self.namespace)

    @property
    def record_path(self) -> Path:
        return self.workdir / "record.txt"

    @property
    def release_path(self) -> Path:
        return self.workdir / "release"

    def env(self, broker_url: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "FAIRQ_URL"}
        env.update(
            FAIRQ_TEST_STORE=self.store_url,
            FAIRQ_TEST_BROKER=broker_url or self.broker_url,
            FAIRQ_TEST_NAMESPACE=self.namespace,
            FAIRQ_TEST_RECORD=str(self.record_path),
            FAIRQ_TEST_RELEASE=str(self.release_path),
            PYTHONUNBUFFERED="1",
        )
        return env

    def start(
        self, name: str, argv: Sequence[str], env: dict[str, str], cwd: Path = HERE
    ) -> Process:
        log_path = self.workdir / f"{name}-{len(self.started)}.log"
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                [sys.executable, *argv],
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = Process(name, popen, log_path)
        self.started.append(process)
        return process

    def worker(self, threads: int = 1, broker_url: str | None = None) -> Process:
        """``dramatiq dramatiq_tasks:broker`` with one process of ``threads`` threads (through
        ``broker_url``, else the test's broker).

        Each thread prefetches one message, and an idle consumer polls Redis at least every
        0.1 s (Dramatiq's default is 1 s), so a job released to an idle worker starts at once.
        """
        argv = ["-m", "dramatiq", "dramatiq_tasks:broker", "--processes", "1"]
        argv += ["--threads", str(threads), "--path", str(HERE)]
        env = self.env(broker_url)
        env.update(dramatiq_queue_prefetch=str(threads), dramatiq_worker_timeout="100")
        return self.start("worker", argv, env)

    def relay(
        self, in_flight: int, broker_url: str | None = None, *args: str, log_level: str = "info"
    ) -> Process:
        """``fairq relay dramatiq_tasks:fair --in-flight N`` (at ``debug`` its log names each
        job it releases, in order: ``Process.released``)."""
        argv = ["-m", "fairq", "--log-level", log_level, "relay", "dramatiq_tasks:fair"]
        argv += ["--in-flight", str(in_flight), *args]
        return self.start("relay", argv, self.env(broker_url))

    def use_lease(self, lease: float) -> Actors:
        """Send from now on with actors whose jobs' leases last ``lease`` seconds."""
        self.actors.fair.app.close()
        self.actors.broker.close()
        self.actors = build(self.broker_url, self.namespace, self.store_url, lease=lease)
        return self.actors

    def records(self, event: str | None = None) -> list[Record]:
        if not self.record_path.exists():
            return []
        lines = self.record_path.read_text(encoding="utf-8").splitlines()
        found = [Record(e, t, int(n), int(p)) for e, t, n, p in (line.split() for line in lines)]
        return [r for r in found if event is None or r.event == event]

    def most_running(self) -> Counter[str]:
        """Per tenant, the most of its runs between their start and end at once."""
        running: Counter[str] = Counter()
        most: Counter[str] = Counter()
        for record in self.records():
            running[record.tenant] += 1 if record.event == "start" else -1
            most[record.tenant] = max(most[record.tenant], running[record.tenant])
        return most

    def note(self, text: str) -> None:
        """A line of the test's own in the record (``mark - 0 0``)."""
        with open(self.record_path, "a", encoding="utf-8") as record:
            record.write(f"{text} - 0 0\n")

    def jobs(self, ids: Sequence[str]) -> list[JobInfo | None]:
        app = self.actors.fair.app
        return [app.job_info(job_id) for job_id in ids]

    def wait_jobs(self, ids: Sequence[str], state: JobState, timeout: float = DEADLINE) -> None:
        def done() -> bool:
            return all(info is not None and info.state is state for info in self.jobs(ids))

        try:
            wait_for(done, f"{len(ids)} jobs {state}", timeout)
        except AssertionError:
            states = [info.state if info else None for info in self.jobs(ids)]
            logs = "\n".join(f"== {p.name}\n{p.log()[-3000:]}" for p in self.started)
            raise AssertionError(f"jobs not {state}: {states}\n{logs}") from None

    def close(self) -> None:
        for process in self.started:
            process.kill()
        self.actors.fair.app.close()
        self.actors.broker.close()
        if self.broker_url.startswith("amqp"):
            names = [self.queue(), self.queue("guarded"), *self.extra_queues]
            amqp.drop(f"{name}{suffix}" for name in names for suffix in ("", ".DQ", ".XQ"))
            return
        client = redis.Redis.from_url(BROKER_URL)
        keys = list(client.scan_iter(match=f"{self.namespace}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty fairq store of ``kind``; removed afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'fairq.db'}"
    elif kind == "redis":
        prefix = f"fqdr{uuid.uuid4().hex[:10]}"
        yield f"{REDIS_URL}?prefix={prefix}"
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
    else:
        from postgres._store import open_disposable, with_option

        backend = open_disposable(POSTGRES_URL, clock="store")  # given back when closed
        try:
            yield with_option(POSTGRES_URL, "schema", backend.schema)
        finally:
            backend.close()


@pytest.fixture
def harness(store_url: str, tmp_path: Path) -> Iterator[Harness]:
    namespace = f"fqtest-{uuid.uuid4().hex[:10]}"
    workdir = tmp_path / "work"
    workdir.mkdir()
    made = Harness(store_url, namespace, workdir, build(BROKER_URL, namespace, store_url))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def rabbit_harness(tmp_path: Path) -> Iterator[Harness]:
    """A Redis store and a RabbitMQ broker (``$FAIRQ_TEST_AMQP_URL``), queues of the test's own."""
    amqp.connect().release()  # fails at once, naming the URL, when RabbitMQ does not answer
    prefix = f"fqdr{uuid.uuid4().hex[:10]}"
    store = f"{REDIS_URL}?prefix={prefix}"
    namespace = f"fqtest-{uuid.uuid4().hex[:10]}"
    workdir = tmp_path / "work"
    workdir.mkdir()
    actors = build(amqp.AMQP_URL, namespace, store)
    made = Harness(store, namespace, workdir, actors, broker_url=amqp.AMQP_URL)
    try:
        yield made
    finally:
        made.close()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
