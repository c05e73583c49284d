"""The App: what users declare and call, one module per part.

``app`` (the ``App`` class: declaring queues and jobs, enqueueing, settings, inspection),
``aio`` (its asyncio twins), ``declare`` (jobs, queues and weight callbacks as declared, with
their checks), ``checks`` (one enqueue call checked against its declaration, in one pass),
``enqueue`` (the enqueue operation, written once for the blocking and the async App),
``signatures`` (binding arguments to a job's own or published signature), ``params`` (the
settings and inspection calls made into the store's params), ``waiting`` (``App.result``'s
wait), ``iteration`` and ``periodic`` (iterative and cron-scheduled jobs), ``unseen_queues``
(queue names nobody knows). Import ``App`` and the rest from ``fairq`` or from here.
"""

from __future__ import annotations

from fairq.app.app import DEFAULT_URL, App, resolve_url
from fairq.app.calls import Call, Options
from fairq.app.declare import BoundOptions, JobDefinition
from fairq.policy.bounds import MAX_TENANT_CHARS

__all__ = [
    "DEFAULT_URL",
    "MAX_TENANT_CHARS",
    "App",
    "BoundOptions",
    "Call",
    "JobDefinition",
    "Options",
    "resolve_url",
]
