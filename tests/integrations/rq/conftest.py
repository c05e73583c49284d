"""Real RQ workers and real ``fairq relay`` processes around a fairq store (SQLite, Redis or
PostgreSQL) and RQ's Redis (``$FAIRQ_TEST_BROKER_URL``, default database 10).

Each test gets its own RQ queue name (the fair tasks are enqueued into it, an explicit queue
for fairq too) and its own store; the broker database is never flushed: a test's RQ keys are
deleted afterwards. Unreachable servers fail the tests, never skip them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from rq import Queue

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
EXAMPLE = TESTS.parent / "examples" / "rq"
for path in (HERE, TESTS, EXAMPLE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import rq_tasks  # noqa: E402

from fairq.cli.loader import rebind  # noqa: E402

BIN = Path(sys.executable).parent
BROKER_URL = rq_tasks.BROKER_URL
STORES = ["sqlite", "redis", "postgres"]


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def broker() -> Iterator[Redis]:
    client = Redis.from_url(BROKER_URL)
    yield client
    client.close()


@pytest.fixture
def queue_name(broker: Redis) -> Iterator[str]:
    """A fresh RQ (and fairq) queue name; its RQ jobs and keys are deleted afterwards."""
    name = f"rqt{uuid.uuid4().hex[:10]}"
    yield name
    queue = Queue(name, connection=broker)
    registries = [
        queue.finished_job_registry,
        queue.failed_job_registry,
        queue.started_job_registry,
        queue.canceled_job_registry,
        queue.scheduled_job_registry,
    ]
    ids = set(queue.get_job_ids())
    for registry in registries:
        ids.update(registry.get_job_ids())
    for job_id in ids:
        broker.delete(f"rq:job:{job_id}", f"rq:results:{job_id}")
    keys = list(broker.scan_iter(match=f"*{name}*"))
    if keys:
        broker.delete(*keys)


@pytest.fixture
def key(broker: Redis) -> Iterator[str]:
    """The list the tasks of this test record their runs in (see rq_tasks.note)."""
    name = f"rqt-notes-{uuid.uuid4().hex[:10]}"
    yield name
    broker.delete(name, f"{name}:stalled")


def notes(broker: Redis, key: str) -> list[tuple[str, str, int, int]]:
    """(event, tenant, n, pid) of every start and end recorded so far, in order."""
    return [tuple(json.loads(raw)[:4]) for raw in broker.lrange(key, 0, -1)]  # type: ignore[misc]


def store_url(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'fairq.db'}"
    elif kind == "redis":
        prefix = f"rq{uuid.uuid4().hex[:8]}"
        base = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
        yield f"{base}?prefix={prefix}"
        client = Redis.from_url(base)
        keys = list(client.scan_iter(match=f"{prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()
    else:
        from postgres._store import open_disposable, server_url, with_option

        backend = open_disposable(clock="store")  # makes the schema; dropped when closed
        try:
            yield with_option(server_url(), "schema", backend.schema)
        finally:
            backend.close()


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The fairq store's URL, one test per kind of store."""
    yield from store_url(request.param, tmp_path)


#: For the scenarios whose store-specific parts the tests over every store already cover.
sqlite_only = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


class Processes:
    """Starts ``rq worker`` and ``fairq relay`` processes; kills all that are left at the end."""

    def __init__(self, store: str, queue: str, tmp: Path) -> None:
        self.store = store
        self.queue = queue
        self.tmp = tmp
        self.started: list[subprocess.Popen[bytes]] = []

    def _start(
        self, name: str, argv: list[str], env: dict[str, str], cwd: Path
    ) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env={
                **os.environ,
                "FAIRQ_URL": self.store,
                "FAIRQ_TEST_BROKER_URL": BROKER_URL,
                "RQ_REDIS_URL": BROKER_URL,
                **env,
            },
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed with it
        )
        log.close()
        proc.log_path = self.tmp / f"{name}.log"  # type: ignore[attr-defined]
        self.started.append(proc)
        return proc

    def worker(
        self,
        module: str = "rq_tasks",
        *,
        scheduler: bool = False,
        worker_class: str | None = None,
        **env: str,
    ) -> subprocess.Popen[bytes]:
        """``rq worker`` on the test's queue; ``-c module`` imports the tasks once per worker."""
        name = f"w{len(self.started)}-{uuid.uuid4().hex[:8]}"
        argv = [str(BIN / "rq"), "worker", self.queue, "--url", BROKER_URL, "-c", module]
        argv += ["--name", name, *(["--with-scheduler"] if scheduler else [])]
        argv += ["--worker-class", worker_class] if worker_class else []
        return self._start(name, argv, env, _home(module))

    def relay(
        self, *args: str, in_flight: int, module: str = "rq_tasks", **env: str
    ) -> subprocess.Popen[bytes]:
        """``fairq relay`` of the test's queue, with ``args``; at debug, its log names each job
        it releases, in order (``released``)."""
        name = f"relay{len(self.started)}"
        argv = [str(BIN / "fairq"), "--log-level", "debug", "relay", f"{module}:fair"]
        argv += ["--queue", self.queue, "--in-flight", str(in_flight), *args]
        return self._start(name, argv, env, _home(module))

    def kill(self, proc: subprocess.Popen[bytes], *also: int) -> None:
        """SIGKILL the process, its group, its children (an RQ work horse has a process group
        of its own) and the processes ``also``."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGSTOP)  # no new work horse from here on
        for pid in [*also, *children(proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def close(self) -> None:
        """Kill what is left; print each process's log (pytest shows it when a test fails)."""
        for proc in self.started:
            self.kill(proc)
            print(f"---- {' '.join(proc.args[:3])} (pid {proc.pid}):\n{log_of(proc)[-4000:]}")  # type: ignore[index]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc: Linux)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def _home(module: str) -> Path:
    return EXAMPLE if module == "rq_reports" else HERE


def log_of(proc: subprocess.Popen[bytes]) -> str:
    path: Path = proc.log_path  # type: ignore[attr-defined]
    return path.read_text(errors="replace")


def released(relay: subprocess.Popen[bytes]) -> list[str]:
    """The fairq job ids a relay released, in the order it did (from its debug log)."""
    return re.findall(r"released job (\S+)", log_of(relay))


@pytest.fixture
def app(store: str) -> Iterator[Any]:
    """The tasks' fairq App, pointed at this test's store."""
    rebind(rq_tasks.fair.app, store)
    yield rq_tasks.fair.app
    rq_tasks.fair.app.close()


@pytest.fixture
def processes(app: Any, queue_name: str, tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(app.url, queue_name, tmp_path)
    yield procs
    procs.close()
