"""Fair scheduling for RQ: fair tasks wait in fairq and a relay releases them into RQ fairly.

* ``fair = FairRQ(redis_connection)`` is the integration object (``fairq relay module:fair``);
* ``@fair.task(queue=..., tenant=...)`` marks a function as fair and declares it as a fairq job
  named by its RQ import path;
* ``fair.queue(name)`` (a ``FairQueue``, an ``rq.Queue``) stores fair tasks in fairq from the
  ordinary ``enqueue``/``enqueue_call``/``enqueue_at``/``enqueue_in``/``enqueue_many`` calls,
  and enqueues every other function into RQ as before;
* the relay publishes each released job as a plain RQ job carrying its lease's ticket in
  ``job.meta``; the fair task's own wrapper, run by any RQ worker, claims the lease before
  the function runs (a stale copy is skipped), keeps it alive, and acks or fails it after.

Completion is reported by the function's wrapper, not by a Job/Worker class or RQ callbacks:
it needs no worker option, runs under every worker class, and sees the start (to skip stale
copies) as well as the end. A work horse that is killed reports nothing: the lease expires
and the relay releases the job again. RQ's own ``Retry`` is never used for fair tasks (the
relay publishes them without it): a failure goes back to fairq, which retries it with its
back-off, then makes it dead.
"""

from __future__ import annotations

try:
    import rq as _rq  # noqa: F401  (the peer library itself: fairq[rq])
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("fairq.integrations.rq needs RQ: pip install 'fairq[rq]'") from exc

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fairq.integrations.rq.fair import FairRQ
    from fairq.integrations.rq.publish import RQPublisher
    from fairq.integrations.rq.queue import FairQueue
    from fairq.integrations.rq.router import GuardedTask
    from fairq.integrations.rq.slots import DEFERRED_KEY
    from fairq.integrations.rq.tasks import SKIPPED_KEY, FairTask, Held, fair_task_of

#: Each public name's module, imported on first use: RQ's worker loads
#: ``fairq.integrations.rq.queue.FairQueue``, and importing this package must not import
#: ``fair.py``, which imports ``queue.py`` back (and the relay, the slots and the publisher).
_HOMES = {
    "DEFERRED_KEY": "slots",
    "SKIPPED_KEY": "tasks",
    "FairQueue": "queue",
    "FairRQ": "fair",
    "FairTask": "tasks",
    "GuardedTask": "router",
    "Held": "tasks",
    "RQPublisher": "publish",
    "fair_task_of": "tasks",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "DEFERRED_KEY",
    "SKIPPED_KEY",
    "FairQueue",
    "FairRQ",
    "FairTask",
    "GuardedTask",
    "Held",
    "RQPublisher",
    "fair_task_of",
]
