"""Why a lease was lost: the store refused an ack, a failure, a release or a heartbeat.

The store only says the lease is not held. Guessing the cause misleads (a store that lost its
data is not a slow worker), so this rare path looks the job up and says what is true now: the
job no longer exists, another attempt holds it, it already finished, or it went back to its
queue; and, when the lease expired, by how long its deadline (as the worker last knew it) had
passed when the worker reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from fairq.contract import Backend, GetJobsParams
from fairq.job import JobInfo, JobState, Lease
from fairq.worker.joblog import describe

ERROR_SHOWN = 200  # the most of a dead job's last error repeated in a log line
#: Start times this close are one run's: a relayed run's start is known to the peer as its
#: claimed deadline less its lease, which float rounding may move by a few ulps.
SAME_RUN = 1e-3


def why_lost(
    backend: Backend, leases: Sequence[tuple[Lease, float | None]], now: float
) -> dict[str, str]:
    """For each (lease, its deadline as last extended; None: not known here, as for a relayed
    message whose hold its relay kept): token -> what happened to the job."""
    try:
        found = backend.get_jobs(GetJobsParams(ids=[lease.job_id for lease, _ in leases]))
    except Exception as exc:
        unknown = f"lease lost; the store could not be asked why ({describe(exc)})"
        return {lease.token: unknown for lease, _ in leases}
    jobs = {info.id: info for info in found}
    return {
        lease.token: _why(lease, deadline, jobs.get(lease.job_id), now)
        for lease, deadline in leases
    }


def _why(lease: Lease, deadline: float | None, info: JobInfo | None, now: float) -> str:
    if info is None:
        return "lease lost: the job no longer exists in the store (its data was lost or deleted)"
    expired = _expired(deadline, now)
    if info.state is JobState.RUNNING:
        if info.started_at is not None and abs(info.started_at - lease.started_at) < SAME_RUN:
            return f"lease lost: {expired}; the job goes back to its queue"
        if info.attempts == lease.attempt:  # a relayed job's hold lapsed: not an attempt
            again = f"the job was handed out again (still attempt {info.attempts})"
            return f"lease lost: {expired}; {again}"
        return f"lease lost: another attempt (attempt {info.attempts}) holds the job now; {expired}"
    if info.state is JobState.SUCCEEDED:
        return "lease lost: the job was already finished (it succeeded)"
    if info.state is JobState.DEAD:
        last = (info.last_error or "").split("\n", 1)[0][:ERROR_SHOWN]
        return f"lease lost: the job is dead now (last error: {last})"
    if info.state is JobState.CANCELLED:
        return f"lease lost: {expired}; the job is cancelled now (it had a cancel request)"
    return f"lease lost: {expired}; the job went back to its queue ({info.state.value})"


def _expired(deadline: float | None, now: float) -> str:
    if deadline is None:
        return "the lease ended"
    if now >= deadline:
        return f"the lease expired {now - deadline:.1f} s before this worker reported"
    return (
        f"the lease expired by the store's clock (by this worker's clock its deadline was "
        f"{deadline - now:.1f} s away)"
    )
