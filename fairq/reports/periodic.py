"""The periodic jobs an App declares, as ``fairq stats`` shows them: the next tick, and the
last tick whose job the store has (found by id: a tick's job id names it, fairq/app/periodic.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fairq.contract import Backend, GetJobsParams

if TYPE_CHECKING:  # the App's schedules; reports sit below the App
    from fairq.app.periodic import Schedule

#: Ticks looked back for a schedule's last job (its newest tick first).
LOOKBACK = 5


@dataclass
class PeriodicReport:
    name: str
    job: str
    cron: str
    timezone: str  # "UTC" when none is given
    tenant: str
    queue: str
    next_tick: float  # epoch seconds
    next_in: float  # seconds from now
    last_tick: float | None  # the newest of the last LOOKBACK ticks whose job is stored
    last_job_id: str | None
    last_state: str | None  # that job's state (a JobState value: scheduled … cancelled)


def periodic_reports(
    backend: Backend, schedules: Sequence[Schedule], now: float
) -> list[PeriodicReport]:
    """One row per schedule, in name order; the store read once for all."""
    ordered = sorted(schedules, key=lambda s: s.name)
    recent = {s.name: [s.latest(now), *s.previous(s.latest(now), LOOKBACK - 1)] for s in ordered}
    ids = [s.job_id(t) for s in ordered for t in recent[s.name]]
    found = {info.id: info for info in backend.get_jobs(GetJobsParams(ids=ids))} if ids else {}
    rows = []
    for schedule in ordered:
        last = next((t for t in recent[schedule.name] if schedule.job_id(t) in found), None)
        job = None if last is None else found[schedule.job_id(last)]
        upcoming = schedule.following(now)
        rows.append(
            PeriodicReport(
                name=schedule.name,
                job=schedule.job,
                cron=schedule.cron,
                timezone=schedule.timezone or "UTC",
                tenant=schedule.tenant,
                queue=schedule.queue,
                next_tick=upcoming,
                next_in=upcoming - now,
                last_tick=last,
                last_job_id=None if job is None else job.id,
                last_state=None if job is None else job.state.value,
            )
        )
    return rows
