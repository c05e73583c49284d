"""Make docs/images/dashboard.png: the dashboard during the demo's flood, in Debian's Chromium.

    python docs/tools/screenshot.py [--out docs/images/dashboard.png]

What it does, all real processes on a fresh SQLite store in a temporary directory: the demo's
greedy tenant floods queue "demo", a `fairq worker` drains it, small tenants arrive mid-flood,
one tenant is capped and one paused; `fairq dashboard` serves the store and the browser watches
the live chart for a while before the picture is taken. tests/web uses the same helpers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from fairq.demo.jobs import WORK, make_app  # noqa: E402
from tests.web.helpers import CHROMIUM, start_dashboard, start_worker  # noqa: E402

JOB_SECONDS = 0.02
#: (seconds after the flood starts, tenant, jobs): the small tenants arrive mid-flood.
ARRIVALS = [(10.0, "small-1", 1500), (25.0, "small-2", 1500), (40.0, "small-3", 1500)]
VIP_AT = 55.0  # a tenant with weight 3 arrives: it gets three shares
SHOT_AT = 80.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs/images/dashboard.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        shoot(Path(tmp), args.out)
    print(f"wrote {args.out}")


def shoot(workdir: Path, out: Path) -> None:
    url = f"sqlite:///{workdir / 'fairq.db'}"
    app = make_app(url)
    app.publish()
    job = app.jobs[WORK]
    app.enqueue_many(job.call("greedy", JOB_SECONDS) for _ in range(20_000))
    app.set_tenant("demo", "batch-importer", max_running=1)
    app.enqueue_many(job.call("batch-importer", JOB_SECONDS * 4) for _ in range(300))
    app.set_tenant("demo", "suspended-co", weight=0)
    app.enqueue_many(job.call("suspended-co", JOB_SECONDS) for _ in range(40))
    worker = start_worker(url, workdir, "--concurrency", "8")
    board = start_dashboard(url, workdir)
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(CHROMIUM))
            page = browser.new_page(viewport={"width": 1400, "height": 1080})
            page.goto(board.base + "/queues/demo")
            started = time.monotonic()
            for at, tenant, jobs in ARRIVALS:
                time.sleep(max(0.0, started + at - time.monotonic()))
                app.enqueue_many(job.call(tenant, JOB_SECONDS) for _ in range(jobs))
            time.sleep(max(0.0, started + VIP_AT - time.monotonic()))
            app.set_tenant("demo", "vip", weight=3)
            app.enqueue_many(job.call("vip", JOB_SECONDS) for _ in range(3000))
            time.sleep(max(0.0, started + SHOT_AT - time.monotonic()))
            page.reload()  # the table as it is now; the chart's points are kept by the page
            page.wait_for_selector("#legend li")
            time.sleep(2.5)  # two more points drawn after the reload
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=False)
            browser.close()
    finally:
        board.stop()
        worker.stop()
        app.close()


if __name__ == "__main__":
    main()
