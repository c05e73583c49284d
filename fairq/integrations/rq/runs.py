"""The worker side of relayed RQ jobs: a fair task's wrapper claims the lease of the RQ job the
relay published for it before the function runs (a stale copy is skipped), and acks or fails
it in fairq after."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from rq import get_current_job

from fairq.integrations.rq.tasks import SKIPPED_KEY, FairTask
from fairq.relay import TICKET_KEY, RelayedRuns

log = logging.getLogger("fairq.integrations.rq")

R = TypeVar("R")

#: The RQ job whose lease this context claimed (a fair task calling another directly runs it
#: plainly: only the outermost call owns the ticket).
_claimed: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fairq_rq_claimed", default=None
)


def run_relayed(
    runs: RelayedRuns,
    task: FairTask,
    fn: Callable[..., R],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> R:
    """Run ``fn``; when this is the RQ job the relay published for it, under its lease."""
    job = get_current_job()
    ticket = job.meta.get(TICKET_KEY) if job is not None else None
    if (
        job is None
        or not isinstance(ticket, Mapping)
        or ticket.get("name") != task.name
        or _claimed.get() == job.id
    ):
        if job is not None and ticket is None and job.func_name == task.name:
            log.warning(
                "fair task %s ran as RQ job %s without fairq (enqueued with a plain "
                "rq.Queue?): use FairRQ.queue(...) so it is scheduled fairly",
                task.name,
                job.id,
            )
        return fn(*args, **kwargs)
    run = runs.begin(ticket)
    if run is None:  # an older copy of a job released again: it must not run
        job.meta[SKIPPED_KEY] = True
        job.save_meta()  # type: ignore[no-untyped-call]
        return None  # type: ignore[return-value]
    token = _claimed.set(job.id)
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:
        _report(run.failed, exc)
        raise
    finally:
        _claimed.reset(token)
    _report(run.succeeded)
    return result


def _report(end: Callable[..., object], *args: Any) -> None:
    """Store a job's end; a store that does not take it leaves the lease to expire (the job
    runs again: at-least-once), which is logged, not raised into RQ."""
    try:
        end(*args)
    except Exception:
        log.exception("could not store the end of a relayed job; its lease will expire")
