"""How long the dashboard takes to serve a queue of many tenants (issue #16's budget: the tenant
page of 10,000 tenants "well under a second").

Fills a fresh SQLite store with ``--tenants`` tenants (one to seven ready jobs each), starts a
real ``fairq dashboard`` process on it, and times ``--rounds`` GETs of each page over HTTP
(after one warm-up), printing the median and the slowest. The dashboard reuses a store read
for ``REUSE_SECONDS``; the GETs are spaced further apart, so each one reads the store.
Everything runs in a temporary directory that is removed at the end.

    .venv/bin/python benchmarks/dashboard_pages.py
    .venv/bin/python benchmarks/dashboard_pages.py --tenants 50000 --rounds 5
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fairq.demo.jobs import WORK, make_app  # noqa: E402
from fairq.web.server import REUSE_SECONDS  # noqa: E402

PAGES = {
    "overview": "/",
    "tenant table, first page": "/queues/demo",
    "tenant table, sorted by id, page 100": "/queues/demo?sort=tenant&dir=asc&page=100",
    "tenant table, searched": "/queues/demo?q=tenant-0999",
    "one tenant": "/queues/demo/tenant?id=tenant-00042",
    "chart poll (JSON)": "/api/queues/demo/throughput",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'fairq.db'}"
        app = make_app(url)
        job = app.jobs[WORK]
        app.enqueue_many(
            job.call(f"tenant-{i:05d}", 0.0) for i in range(args.tenants) for _ in range(i % 7 + 1)
        )
        app.close()
        log = Path(tmp) / "dashboard.log"
        with open(log, "wb") as out:
            command = [sys.executable, "-m", "fairq", "dashboard", "--url", url, "--port", "0"]
            process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            base = _address(log, process)
            print(f"{args.tenants:,} tenants on SQLite; {args.rounds} GETs per page")
            print(f"{'page':40} {'median':>8} {'slowest':>8}")
            for name, path in PAGES.items():
                times = [_get(base + path) for _ in range(args.rounds + 1)][1:]
                print(f"{name:40} {statistics.median(times):7.3f}s {max(times):7.3f}s")
        finally:
            process.terminate()
            process.wait(timeout=30)


def _address(log: Path, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"fairq dashboard on (http://\S+)/", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise SystemExit(f"the dashboard exited:\n{log.read_text()}")
        time.sleep(0.05)
    raise SystemExit("the dashboard did not start within 60 s")


def _get(url: str) -> float:
    time.sleep(REUSE_SECONDS + 0.1)  # past the reuse of the last read: this one reads the store
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
