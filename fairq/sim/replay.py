"""A queue's own history as a simulator trace: what ``fairq simulate --from URL`` replays.

``read_history`` pages through ``Backend.history`` (fairq/recorded.py: read-only, never
locking live work) and turns each job into a ``SimJob``: it arrives when it was (last) due,
``max(enqueued_at, run_at)``, and runs what its last run took, ``finished_at - started_at``;
a job still waiting or running runs its (queue, name)'s learned run time (``job_costs``,
fairq/policy/cost.py), or its declared cost before anything was learned. A job cancelled
before it started did no work and is left out. The recorded starts and ends are kept too, as
``actual`` records: what really happened, for the figures to compare a replay with.

The settings in force come from the store's reads of the queue and its tenants
(``get_queue``, ``stats``): the store keeps the settings of now, not their history, so a
setting changed during the window is replayed as it is now (docs/what-if.md).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from fairq.contract import (
    Backend,
    GetQueueParams,
    HistoryParams,
    JobCostsParams,
    QueueSettings,
    RecordedJob,
    StatsParams,
)
from fairq.errors import ConfigError
from fairq.job import JobState
from fairq.sim.engine import Record, SimJob
from fairq.sim.strategies.fairq import Own

PAGE = 10_000  # jobs per history page: a page is held whole while it is converted
UNFINISHED = (JobState.SCHEDULED, JobState.READY, JobState.RUNNING)
Progress = Callable[[int], None]  # called with the jobs read so far
_EVER = 1e18  # a window that holds every job a store can have


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """A queue's jobs of one window, ready to replay. Times are seconds from ``origin``, the
    first arrival (``origin`` is the store's clock)."""

    queue: str
    since: float
    until: float
    origin: float
    jobs: list[SimJob]  # in arrival order
    actual: list[Record]  # the jobs that started, as they ran (a running one to its estimate)
    settings: QueueSettings
    own: dict[str, Own]  # tenants' settings that differ from the queue's
    weights: dict[str, float]  # every tenant's weight in force
    estimated: int = 0  # jobs not finished: they run their learned run time
    cancelled: int = 0  # jobs cancelled before they started: left out
    notes: list[str] = field(default_factory=list)

    @property
    def tenants(self) -> list[str]:
        return sorted({job.tenant for job in self.jobs})

    def workers(self) -> int:
        """The pool the actual run had, as far as the store can tell: the most jobs it had
        running at once (the store does not record its workers)."""
        ends = sorted([(r.start, 1) for r in self.actual] + [(r.finish, -1) for r in self.actual])
        running = most = 0
        for _, change in ends:  # an end sorts before a start at the same instant
            running += change
            most = max(most, running)
        return max(most, 1)


def recorded_pages(
    backend: Backend, queue: str, since: float, until: float, *, limit: int = PAGE
) -> Iterable[list[RecordedJob]]:
    """Every page of the queue's history in the window, in the store's order."""
    cursor: str | None = None
    while True:
        page = backend.history(
            HistoryParams(queue=queue, since=since, until=until, cursor=cursor, limit=limit)
        )
        yield list(page.jobs)
        if page.cursor is None:
            return
        cursor = page.cursor


def read_history(
    backend: Backend,
    queue: str,
    since: float,
    until: float,
    progress: Progress | None = None,
    *,
    most: int | None = None,
) -> Recorded:
    """The queue's window as a trace; ConfigError, naming what to change, when it holds no job
    (or more than ``most``: a caller that must answer quickly, the dashboard)."""
    latest: dict[str, RecordedJob] = {}
    for page in recorded_pages(backend, queue, since, until):
        latest.update((job.id, job) for job in page)  # a job read twice: its newer copy
        if progress is not None:
            progress(len(latest))
        if most is not None and len(latest) > most:
            raise ConfigError(
                f"queue {queue!r} has more than {most:,} jobs in this window: replay it with "
                f"`fairq simulate --from URL --queue {queue} --since …` (docs/what-if.md)"
            )
    if not latest:
        raise ConfigError(_empty_window(backend, queue, since, until))
    learned = {c.name: c.estimate for c in backend.job_costs(JobCostsParams(queue=queue))}
    settings = backend.get_queue(GetQueueParams(queue=queue))
    own, weights = _tenant_settings(backend, settings)
    return _trace(queue, since, until, latest.values(), learned, settings, own, weights)


def _trace(
    queue: str,
    since: float,
    until: float,
    found: Iterable[RecordedJob],
    learned: dict[str, float],
    settings: QueueSettings,
    own: dict[str, Own],
    weights: dict[str, float],
) -> Recorded:
    kept: list[tuple[float, float, RecordedJob]] = []
    cancelled = 0
    for j in found:
        if j.started_at is None and j.state not in UNFINISHED:
            cancelled += 1
        else:
            kept.append((max(j.enqueued_at, j.run_at), j.enqueued_at, j))
    kept.sort(key=_when)  # stable: jobs of one instant keep the store's order
    origin = kept[0][0]
    jobs: list[SimJob] = []
    actual: list[Record] = []
    estimated = retried = 0
    names: dict[str, str] = {}  # one str per tenant and name, not one per job
    for n, (arrival, _, job) in enumerate(kept):
        guess = learned.get(job.name, job.cost)
        if job.finished_at is not None and job.started_at is not None:
            duration = max(job.finished_at - job.started_at, 0.0)
        else:
            duration = guess
            estimated += 1
        retried += job.attempts > 1
        sim = SimJob(
            id=n,
            arrival=arrival - origin,
            tenant=names.setdefault(job.tenant, job.tenant),
            duration=duration,
            cost=guess,
            name=names.setdefault(job.name, job.name),
            priority=job.priority,
        )
        jobs.append(sim)
        if job.started_at is not None:
            start = max(job.started_at - origin, sim.arrival)
            actual.append(Record(sim, start, start + duration, 0))
    weights = {t: weights.get(t, settings.weight) for t in {j.tenant for j in jobs}}
    return Recorded(
        queue=queue,
        since=since,
        until=until,
        origin=origin,
        jobs=jobs,
        actual=actual,
        settings=settings,
        own={t: o for t, o in own.items() if t in weights},
        weights=weights,
        estimated=estimated,
        cancelled=cancelled,
        notes=_notes(estimated, cancelled, retried),
    )


def _when(entry: tuple[float, float, RecordedJob]) -> tuple[float, float]:
    return entry[0], entry[1]


def _notes(estimated: int, cancelled: int, retried: int) -> list[str]:
    notes = []
    if estimated:
        notes.append(f"{estimated:,} jobs had not finished: they run their learned run time")
    if cancelled:
        notes.append(f"{cancelled:,} jobs were cancelled before they started: left out")
    if retried:
        notes.append(
            f"{retried:,} jobs ran more than once: only their last run is kept, replayed "
            "from when it was due"
        )
    return notes


def _tenant_settings(
    backend: Backend, settings: QueueSettings
) -> tuple[dict[str, Own], dict[str, float]]:
    """Each tenant's settings that differ from the queue's, and every tenant's weight. The
    store reports the settings in force; one equal to the queue's is read as the queue's."""
    own: dict[str, Own] = {}
    weights: dict[str, float] = {}
    for row in backend.stats(StatsParams(queue=settings.queue)):
        weights[row.tenant] = row.weight
        differs = Own(
            weight=row.weight if row.weight != settings.weight else None,
            max_running=row.max_running if row.max_running != settings.max_running else None,
            rate=row.rate if row.rate != settings.rate else None,
        )
        if differs != Own():
            own[row.tenant] = differs
    return own, weights


def _empty_window(backend: Backend, queue: str, since: float, until: float) -> str:
    """Why a window holds no job, in one line: the queue has none kept, or none in it."""
    first, last = math.inf, -math.inf
    for page in recorded_pages(backend, queue, -_EVER, _EVER):
        for job in page:
            first, last = min(first, job.enqueued_at), max(last, job.enqueued_at)
    window = f"from {_stamp(since)} to {_stamp(until)}"
    if first > last:
        return (
            f"queue {queue!r} has no jobs in this store ({window} or ever kept); check the "
            "queue's name (`fairq stats` lists the queues)"
        )
    return (
        f"queue {queue!r} has no jobs enqueued {window}: the store keeps its jobs enqueued "
        f"from {_stamp(first)} to {_stamp(last)} (older ones were pruned by the retention); "
        "choose a window within that"
    )


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- export -----------------------------------------------------------------------------------


def tenant_alias(tenant: str, salt: str) -> str:
    """A tenant id hashed (``--hash-tenants``): the same id the same alias within one export,
    not reversible without the salt."""
    return "t-" + hashlib.sha256(f"{salt}\0{tenant}".encode()).hexdigest()[:12]


def export(recorded: Recorded, path: Path, *, hash_tenants: bool = False, salt: str = "") -> int:
    """Write the trace as ``load_trace`` reads it (.csv with a header, or .json), with the
    job's name and priority besides; returns the jobs written."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".json"):
        raise ConfigError(f"--export {path}: name it .csv or .json so its format is known")
    rename = (lambda t: tenant_alias(t, salt)) if hash_tenants else (lambda t: t)
    rows = (
        {
            "arrival": round(j.arrival, 6),
            "tenant": rename(j.tenant),
            "duration": round(j.duration, 6),
            "name": j.name,
            "priority": j.priority,
        }
        for j in recorded.jobs
    )
    with path.open("w", encoding="utf-8", newline="") as out:
        if suffix == ".csv":
            writer = csv.DictWriter(out, ["arrival", "tenant", "duration", "name", "priority"])
            writer.writeheader()
            writer.writerows(rows)
        else:
            out.write("[\n")
            for n, row in enumerate(rows):
                out.write(("," if n else "") + json.dumps(row) + "\n")
            out.write("]\n")
    return len(recorded.jobs)
