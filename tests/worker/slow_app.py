"""``tests.worker.apps:app``, but its import waits until ``$FAIRQ_TEST_LOADED`` exists: a test
controls how long a worker process spends loading its app (its start-up)."""

from __future__ import annotations

import os
from pathlib import Path

from .apps import JOB_DEADLINE, _wait, make_app

_wait(lambda: Path(os.environ["FAIRQ_TEST_LOADED"]).exists(), "$FAIRQ_TEST_LOADED")
assert JOB_DEADLINE  # the wait above gives up after this many seconds
app = make_app(os.environ["FAIRQ_TEST_URL"])
