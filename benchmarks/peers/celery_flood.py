"""Celery under the flood: one worker, prefork pool of 8 processes (8 jobs at once)."""

import sys

from _flood import arguments, flood, report
from celery_jobs import stamp

worker = [
    sys.executable, "-m", "celery", "-A", "celery_jobs", "worker", "--concurrency", "8",
    "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat",
]  # fmt: skip
report(flood(lambda tenant, at: stamp.delay(tenant, at), [worker], arguments()))
