"""How the worker describes jobs and errors in its own records.

The job log itself (one line per job end, lost and expired leases) is a plug-in of the
instrumentation seam, ``fairq.instrument.logs.JobLog``, which every App has; the names it shares
with the worker's other records are re-exported here.
"""

from __future__ import annotations

from fairq.instrument import Outcome
from fairq.instrument.logs import describe, job_fields, show_tenant, trace_of

__all__ = ["ERROR_CHARS", "Outcome", "describe", "job_fields", "show_tenant", "trace_of"]

ERROR_CHARS = 8000  # the most of an error (message and traceback) a store keeps
