"""A worker's periodic jobs: a thread enqueueing each tick of the schedules of its queues.

Every worker serving a schedule's queue runs it (``fairq worker --no-periodic`` opts out), so
the schedule goes on while any one worker is up, and no process of its own has to be kept
alive. At a tick each of them enqueues the tick's job; the store keeps one, by the tick's
unique key (fairq/app/periodic.py), and the others get its id.

Missed ticks. At start and at each wake only the latest tick is enqueued, and only while it is
at most its grace old (``misfire_grace``; by default until the next tick): a tick is never
enqueued late in a burst after downtime. A schedule with no job of its last ``LOOKBACK`` ticks
stored starts with its next tick unless its latest is at most ``NEW_SCHEDULE_SLACK`` late (a
first deploy does not run a daily job at once). Older ticks are dropped and counted in one
warning per schedule, counting only ticks whose job no worker stored: at start those after the
newest of the last ``LOOKBACK`` ticks whose job the store still has (when it has none, a new
schedule cannot be told from one down for long, and none is counted); later, those that came
and went since this thread's last wake (a stall, the store out of reach).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from fairq.app.calls import Call, Options
from fairq.app.checks import new_job
from fairq.app.enqueue import store
from fairq.app.periodic import Schedule
from fairq.contract import GetJobsParams
from fairq.errors import DuplicateJob
from fairq.worker.joblog import describe, trace_of

if TYPE_CHECKING:
    from fairq.app import App

log = logging.getLogger("fairq.worker")

LOOKBACK = 20  # ticks looked back at start for the schedule's last job
#: At start, a schedule none of whose last ``LOOKBACK`` ticks has a stored job is taken for a new
#: one: its latest tick is enqueued only when at most this late. A first deploy at 15:00 must
#: not run a ``0 3 * * *`` job at once (its grace, until the next tick, would allow it).
NEW_SCHEDULE_SLACK = 60.0
MAX_COUNTED = 1000  # missed ticks counted at most in one warning
MAX_PAUSE = 60.0  # the longest sleep: a wall clock set forward is noticed within it
MAX_PAUSE_OWN_CLOCK = 1.0  # ... and with a clock of the app's own (a test's), which may jump
RETRY_PAUSE = 1.0  # after a failure, before trying again


@dataclass(frozen=True)
class Fired:
    """What one schedule did at a wake: the tick it enqueued (``job_id``: the tick's job,
    ``stored``: by this call, not another worker's), or dropped (``job_id`` None), and how
    many older ticks it dropped unstored (``missed``)."""

    schedule: str
    tick: float
    job_id: str | None
    stored: bool
    missed: int


class PeriodicScheduler:
    """A daemon thread running ``schedules`` for ``app``, by ``clock`` (the app's)."""

    def __init__(
        self, app: App, schedules: Sequence[Schedule], *, clock: Callable[[], float]
    ) -> None:
        self.app = app
        self.schedules = list(schedules)
        self.clock = clock
        self._last: dict[str, float] = {}  # the latest tick handled, per schedule
        self._failed = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fairq-periodic", daemon=True)

    def start(self) -> None:
        if self.schedules:
            log.info(
                "periodic: %d schedule(s): %s",
                len(self.schedules),
                ", ".join(f"{s.name} ({s.cron})" for s in self.schedules),
                extra={"action": "periodic_start"},
            )
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def run_once(self, now: float | None = None) -> list[Fired]:
        """Handle every schedule's latest tick at ``now`` (the clock's, by default). A
        schedule whose store call fails is tried again at the next wake."""
        at = self.clock() if now is None else now
        fired: list[Fired] = []
        self._failed = False
        for schedule in self.schedules:
            try:
                done = self._run(schedule, at)
            except Exception as exc:
                self._failed = True
                log.error(
                    "periodic %r: %s; trying again",
                    schedule.name,
                    describe(exc),
                    exc_info=trace_of(exc),
                    extra={"action": "periodic_failed", "schedule": schedule.name},
                )
                continue
            if done is not None:
                fired.append(done)
        return fired

    def next_due(self, now: float) -> float:
        """When the next tick of any schedule comes (by the app's clock)."""
        return min(s.following(max(self._last.get(s.name, now), now)) for s in self.schedules)

    def _serve(self) -> None:
        """Sleep until the next tick (by the thread's clock, the app's when it is the wall
        clock; else look every second), run, again."""
        longest = MAX_PAUSE if self.clock is time.time else MAX_PAUSE_OWN_CLOCK
        while True:
            self.run_once()
            now = self.clock()
            pause = RETRY_PAUSE if self._failed else min(self.next_due(now) - now, longest)
            if self._stopped.wait(max(pause, 0.001)):
                return

    def _run(self, schedule: Schedule, now: float) -> Fired | None:
        tick = schedule.latest(now)
        last = self._last.get(schedule.name)
        if last is not None and tick <= last:
            return None
        due = now - tick <= schedule.grace(tick)
        older = (
            self._older_at_start(schedule, tick) if last is None else _between(schedule, last, tick)
        )
        new = last is None and older is None  # no job of its last ticks is stored
        if new and (not due or now - tick > NEW_SCHEDULE_SLACK):  # nothing missed: not counted
            log.info(
                "periodic %r: no job of its last %d ticks is stored (a new schedule, or one whose "
                "jobs were pruned): it starts with its next tick, not the one of %s",
                schedule.name,
                LOOKBACK,
                _show(tick),
                extra={"action": "periodic_new", "schedule": schedule.name},
            )
            self._last[schedule.name] = tick
            return Fired(schedule.name, tick, None, False, 0)
        older = older or []
        job_id, stored = self._enqueue(schedule, tick, now) if due else (None, False)
        dropped = older if due else [*older, tick]
        self._last[schedule.name] = tick
        missed = self._unstored(schedule, dropped)
        if missed:
            log.warning(
                "periodic %r: %s%d tick(s) from %s to %s dropped, not enqueued: older than the "
                "misfire grace when a worker could enqueue them",
                schedule.name,
                "at least " if len(missed) >= MAX_COUNTED else "",
                len(missed),
                _show(min(missed)),
                _show(max(missed)),
                extra={"action": "periodic_missed", "schedule": schedule.name},
            )
        return Fired(schedule.name, tick, job_id, stored, len(missed))

    def _enqueue(self, schedule: Schedule, tick: float, now: float) -> tuple[str, bool]:
        """Enqueue the tick's job; its id, and whether this call stored it."""
        definition = self.app.jobs[schedule.job]
        options = Options(tenant=schedule.tenant, queue=schedule.queue)
        call = Call(schedule.job, schedule.args, dict(schedule.kwargs), options)
        job = replace(
            new_job(self.app, call, definition.job_type, now),
            id=schedule.job_id(tick),
            unique=schedule.unique(tick),
        )
        try:
            result = store(self.app, [job], now)
        except DuplicateJob:  # the tick's key is gone (clocks far apart), its job is not
            return job.id, False
        stored = 0 not in result.existing
        found = result.existing.get(0, job.id)
        extra = {"schedule": schedule.name, "job_id": found}
        if stored:
            log.info(
                "periodic %r: tick %s enqueued as job %s",
                schedule.name,
                _show(tick),
                found,
                extra={"action": "periodic_enqueued", **extra},
            )
        else:
            log.debug(
                "periodic %r: tick %s already enqueued (job %s)",
                schedule.name,
                _show(tick),
                found,
                extra={"action": "periodic_held", **extra},
            )
        return found, stored

    def _older_at_start(self, schedule: Schedule, tick: float) -> list[float] | None:
        """The ticks after the newest of the last ``LOOKBACK`` whose job the store has; None
        when it has none of them (and none of ``tick`` itself)."""
        before = schedule.previous(tick, LOOKBACK)
        found = self._stored(schedule, before)
        newest = next((i for i, t in enumerate(before) if t in found), None)
        if newest is None:
            return None if not self._stored(schedule, [tick]) else []
        return before[:newest]

    def _unstored(self, schedule: Schedule, ticks: list[float]) -> list[float]:
        found = self._stored(schedule, ticks)
        return [t for t in ticks if t not in found]

    def _stored(self, schedule: Schedule, ticks: list[float]) -> set[float]:
        """The ticks whose job the store has (any state)."""
        if not ticks:
            return set()
        ids = [schedule.job_id(t) for t in ticks]
        jobs = self.app.timed_backend.get_jobs(GetJobsParams(ids=ids))
        return {t for t in (schedule.tick_of(info.id) for info in jobs) if t is not None}


def _between(schedule: Schedule, last: float, tick: float) -> list[float]:
    """The ticks strictly between ``last`` and ``tick`` (at most ``MAX_COUNTED``)."""
    found: list[float] = []
    at = schedule.following(last)
    while at < tick and len(found) < MAX_COUNTED:
        found.append(at)
        at = schedule.following(at)
    return found


def _show(tick: float) -> str:
    return datetime.fromtimestamp(tick, timezone.utc).isoformat(timespec="seconds")
