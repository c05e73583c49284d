"""The job ``benchmarks/chaos.py`` runs; workers load it as ``chaos_jobs:app``.

Each run appends a ``start`` and an ``end`` line (JSON) to one event log shared by every
process. A line is one ``os.write`` on a descriptor opened with ``O_APPEND``, so lines from
different processes never interleave, and a line written survives a SIGKILL of its writer (it
is in the kernel's page cache, not in a buffer of the process).
"""

from __future__ import annotations

import json
import os
import time

from fairq import App

EVENTS_ENV = "FAIRQ_CHAOS_EVENTS"  # path of the event log
LEASE_ENV = "FAIRQ_CHAOS_LEASE"  # seconds
JOB_NAME = "chaos.work"

_fd: dict[int, int] = {}  # pid -> descriptor, so a forked child opens its own


def record(event: str, tag: int, tenant: str) -> None:
    pid = os.getpid()
    if pid not in _fd:
        _fd[pid] = os.open(os.environ[EVENTS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = {
        "e": event,
        "tag": tag,
        "tenant": tenant,
        "pid": pid,
        "mono": time.monotonic(),  # CLOCK_MONOTONIC: one clock for every process of the machine
        "wall": time.time(),
    }
    os.write(_fd[pid], (json.dumps(line) + "\n").encode())


def make_app(url: str | None = None, lease: float | None = None) -> App:
    app = App(url)
    seconds = lease if lease is not None else float(os.environ.get(LEASE_ENV, "5"))

    @app.job(name=JOB_NAME, tenant="tenant", lease=seconds)
    def work(tenant: str, tag: int, millis: float) -> None:
        """Record the start, work ``millis`` ms, record the end."""
        record("start", tag, tenant)
        time.sleep(millis / 1000)
        record("end", tag, tenant)

    return app


app = make_app()
