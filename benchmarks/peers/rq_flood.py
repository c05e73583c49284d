"""RQ under the flood: eight standard ``rq worker`` processes (one job each at once, forked)."""

import sys

from _drive import URL, counter
from _flood import arguments, flood, report
from rq import Queue
from rq_jobs import stamp

queue = Queue("default", connection=counter())
worker = [sys.executable, "-m", "rq.cli", "worker", "--url", URL, "--quiet", "default"]
report(flood(lambda tenant, at: queue.enqueue(stamp, tenant, at), [worker] * 8, arguments()))
