"""How the worker describes jobs and errors in its own records.

The job log itself (one line per job end, lost and expired leases) is a plug-in of the
instrumentation seam, ``fairq.instrument.logs.JobLog``, which every App has; the names it shares
with the worker's other records are re-exported here.
"""

from __future__ import annotations

from fairq.errors import FairqError
from fairq.instrument import Outcome
from fairq.instrument.logs import describe, job_fields, show_tenant

__all__ = ["ERROR_CHARS", "Outcome", "describe", "job_fields", "show_tenant", "trace_of"]

ERROR_CHARS = 8000  # the most of an error (message and traceback) a store keeps


def trace_of(exc: BaseException) -> BaseException | None:
    """What to log with a store call's error as its traceback: nothing for fairq's own errors
    (a store out of reach, a schema from another fairq): their message says what is wrong and
    where, in one line, on every store; anything else is a bug worth its traceback."""
    return None if isinstance(exc, FairqError) else exc
