"""``App.result``'s wait, written once for the blocking and the async method
(fairq.backends.steps): read the job, and pause, until its result is settled or the time is up.

It yields ``GetJobsParams`` (the reply: ``get_jobs``'s list) or ``Pause`` (the reply: None),
so ``App.result`` performs them with the store and ``time.sleep``, ``App.aresult`` with the
async store and ``asyncio.sleep``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fairq.backends.steps import Steps
from fairq.contract import GetJobsParams
from fairq.errors import ConfigError, ResultTimeout
from fairq.policy.bounds import seconds
from fairq.results import poll_delays, settled


@dataclass(frozen=True)
class Pause:
    seconds: float


Wanted = GetJobsParams | Pause


def check_timeout(timeout: float | timedelta | None) -> float | None:
    wait = None if timeout is None else seconds("timeout", timeout)
    if wait is not None and not 0 <= wait < float("inf"):
        raise ConfigError(f"timeout must be a non-negative number of seconds, got {timeout!r}")
    return wait


def result_of(job_id: str, wait: float | None) -> Steps[Wanted, Any]:
    """The job's result once it succeeded, read again and again at growing intervals
    (``poll_delays``) for up to ``wait`` seconds (None: as long as it takes)."""
    give_up = None if wait is None else time.monotonic() + wait
    for delay in poll_delays():
        found = yield GetJobsParams(ids=[job_id])
        done, value = settled(found[0] if found else None, job_id)
        if done:
            return value
        left = None if give_up is None else give_up - time.monotonic()
        if left is not None and left <= 0:
            raise ResultTimeout(
                f"job {job_id} has not finished after {wait:g} s; wait again, or look at "
                f"it with `fairq job {job_id}`"
            )
        yield Pause(delay if left is None else min(delay, left))
    raise AssertionError("poll_delays never ends")  # pragma: no cover
