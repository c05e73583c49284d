"""Dramatiq under the flood: ``dramatiq --processes 2 --threads 4`` (8 jobs at once)."""

import sys

from _flood import arguments, flood, report
from dramatiq_jobs import stamp

worker = [sys.executable, "-m", "dramatiq", "dramatiq_jobs", "--processes", "2", "--threads", "4"]
report(flood(lambda tenant, at: stamp.send(tenant, at), [worker], arguments()))
