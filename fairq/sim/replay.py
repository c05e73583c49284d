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
import heapq
import json
import math
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

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
from fairq.sim.engine import Record, SimJob, Waiting
from fairq.sim.strategies.fairq import Own

PAGE = 10_000  # jobs per history page: a page is held whole while it is converted
RUN = 100_000  # jobs sorted in memory at once: a longer window is sorted in runs on disk
CHUNK = 1_000  # rows a line of a run's file
UNFINISHED = (JobState.SCHEDULED, JobState.READY, JobState.RUNNING)
Progress = Callable[[int], None]  # called with the jobs read so far
_EVER = 1e18  # a window that holds every job a store can have
#: A job of the trace: (job, its recorded start, its recorded end), times from the origin;
#: start and end None for a job that never started.
Entry = tuple[SimJob, float | None, float | None]


class Trace:
    """A window's jobs, sorted into arrival order with memory bounded by ``RUN``: each
    ``RUN`` rows read are sorted and written to a temporary file (JSON, ``CHUNK`` rows a
    line), and reading
    merges the files. A window of at most ``RUN`` jobs stays in memory. A job read twice (a
    store may give a job that moved during the read again, fairq/recorded.py) keeps its
    later copy: its copies sort next to each other (by arrival, enqueue time, id, then the
    order read)."""

    def __init__(self) -> None:
        self._rows: list[list[Any]] = []
        self._files: list[IO[str]] = []
        self.read = 0

    def add(self, job: RecordedJob, duration: float, cost: float, estimated: bool) -> None:
        arrival = max(job.enqueued_at, job.run_at)
        self._rows.append(
            [arrival, job.enqueued_at, job.id, self.read, job.tenant, job.name, job.priority,
             duration, cost, job.started_at, int(estimated), int(job.attempts > 1)]
        )  # fmt: skip
        self.read += 1
        if len(self._rows) >= RUN:
            self._spill()

    def _spill(self) -> None:
        self._rows.sort()
        spilled = tempfile.TemporaryFile(  # noqa: SIM115 (kept open to be read; close())
            "w+", encoding="utf-8", prefix="fairq-trace-"
        )
        rows = self._rows  # a line holds CHUNK rows: far fewer calls than a line a row
        spilled.writelines(
            json.dumps(rows[at : at + CHUNK], separators=(",", ":")) + "\n"
            for at in range(0, len(rows), CHUNK)
        )
        self._files.append(spilled)
        self._rows = []

    def done(self) -> None:
        """Every row added: sort the last run (written out too when others were)."""
        if self._files and self._rows:
            self._spill()
        self._rows.sort()

    def rows(self) -> Iterator[list[Any]]:
        """The rows in arrival order, each job once (its last copy read). One reading at a
        time: readings of a spilled trace share its files' positions."""
        if self._files:
            for spilled in self._files:
                spilled.seek(0)
            merged: Iterable[list[Any]] = heapq.merge(*map(_read_back, self._files))
        else:
            merged = self._rows
        held: list[Any] | None = None
        for row in merged:
            if held is not None and row[2] != held[2]:
                yield held
            held = row
        if held is not None:
            yield held

    def close(self) -> None:
        for spilled in self._files:
            spilled.close()
        self._files = []


def _read_back(spilled: IO[str]) -> Iterator[list[Any]]:
    for line in spilled:
        yield from json.loads(line)


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """A queue's jobs of one window, ready to replay: ``pages`` reads them in arrival order
    as often as asked, a page at a time. Times are seconds from ``origin``, the first arrival
    (``origin`` is the store's clock). The figures of the whole trace were taken on the way."""

    queue: str
    since: float
    until: float
    origin: float
    trace: Trace
    count: int  # jobs
    pool: int  # the most jobs the store had running at once
    window: float  # the fairness figures' window (fairq.sim.metrics.default_window)
    first_start: float  # the first recorded start (inf: none)
    settings: QueueSettings
    own: dict[str, Own]  # tenants' settings that differ from the queue's
    weights: dict[str, float]  # every tenant's weight in force
    estimated: int = 0  # jobs not finished: they run their learned run time
    cancelled: int = 0  # jobs cancelled before they started: left out
    notes: list[str] = field(default_factory=list)

    @property
    def tenants(self) -> list[str]:
        return sorted(self.weights)

    def workers(self) -> int:
        """The pool the actual run had, as far as the store can tell: the most jobs it had
        running at once (the store does not record its workers)."""
        return self.pool

    def pages(self, size: int = PAGE) -> Iterator[list[Entry]]:
        """The jobs in arrival order, ``size`` at a time, each with its recorded run."""
        return _entries(self.trace.rows(), self.origin, size)

    @property
    def jobs(self) -> list[SimJob]:
        """Every job, in arrival order: for a window that fits in memory (tests, plots)."""
        return [job for page in self.pages() for job, _, _ in page]

    @property
    def actual(self) -> list[Record]:
        """The jobs that started, as they ran: for a window that fits in memory."""
        return [
            Record(job, start, finish, 0)
            for page in self.pages()
            for job, start, finish in page
            if start is not None and finish is not None
        ]

    def close(self) -> None:
        """Remove the trace's temporary files (they go with the process anyway)."""
        self.trace.close()


def _entries(rows: Iterable[list[Any]], origin: float, size: int) -> Iterator[list[Entry]]:
    names: dict[str, str] = {}  # one str per tenant and name, not one per job
    page: list[Entry] = []
    for n, row in enumerate(rows):
        arrival, _, _, _, tenant, name, priority, duration, cost, started = row[:10]
        job = SimJob(
            id=n,
            arrival=arrival - origin,
            tenant=names.setdefault(tenant, tenant),
            duration=duration,
            cost=cost,
            name=names.setdefault(name, name),
            priority=priority,
        )
        if started is None:
            page.append((job, None, None))
        else:
            start = max(started - origin, job.arrival)
            page.append((job, start, start + duration))
        if len(page) >= size:
            yield page
            page = []
    if page:
        yield page


class Timeline:
    """Recorded runs fed in arrival order, told back in time order: each tenant's jobs
    waiting (+1 at an arrival, -1 at a start: ``fairq.sim.engine.Waiting``) and the most
    runs at once. It holds the jobs waiting and running at the latest arrival fed."""

    def __init__(self, waiting: Waiting | None = None) -> None:
        self.waiting = waiting
        self.most = 0
        self._starts: list[tuple[float, float, str]] = []  # (start, end, tenant), a heap
        self._ends: list[float] = []  # a heap
        self._at = -math.inf

    def add(self, tenant: str, arrival: float, start: float | None, finish: float) -> None:
        if arrival > self._at:
            self._at = arrival
            self._flush(arrival)  # the starts before it: later ones start later still
        if self.waiting is not None:
            self.waiting(tenant, 1, arrival)
        if start is not None:
            heapq.heappush(self._starts, (start, finish, tenant))

    def close(self) -> None:
        self._flush(math.inf)

    def _flush(self, before: float) -> None:
        starts, ends, waiting = self._starts, self._ends, self.waiting
        while starts and starts[0][0] < before:
            start, finish, tenant = heapq.heappop(starts)
            while ends and ends[0] <= start:  # an end sorts before a start at one instant
                heapq.heappop(ends)
            heapq.heappush(ends, finish)
            self.most = max(self.most, len(ends))
            if waiting is not None:
                waiting(tenant, -1, start)


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
    learned = {c.name: c.estimate for c in backend.job_costs(JobCostsParams(queue=queue))}
    trace = Trace()
    cancelled = 0
    try:
        for page in recorded_pages(backend, queue, since, until):
            for job in page:
                if job.started_at is None and job.state not in UNFINISHED:
                    cancelled += 1  # a copy read twice is counted twice: a rare overcount
                    continue
                guess = learned.get(job.name, job.cost)
                if job.finished_at is not None and job.started_at is not None:
                    trace.add(job, max(job.finished_at - job.started_at, 0.0), guess, False)
                else:
                    trace.add(job, guess, guess, True)
            if progress is not None:
                progress(trace.read)
            if most is not None and trace.read > most:
                raise ConfigError(
                    f"queue {queue!r} has more than {most:,} jobs in this window: replay it "
                    f"with `fairq simulate --from URL --queue {queue} --since …` "
                    "(docs/what-if.md)"
                )
        trace.done()
        if not trace.read:
            raise ConfigError(_empty_window(backend, queue, since, until))
        settings = backend.get_queue(GetQueueParams(queue=queue))
        own, weights = _tenant_settings(backend, settings)
        return _summed(queue, since, until, trace, cancelled, settings, own, weights)
    except BaseException:
        trace.close()
        raise


def _summed(
    queue: str,
    since: float,
    until: float,
    trace: Trace,
    cancelled: int,
    settings: QueueSettings,
    own: dict[str, Own],
    weights: dict[str, float],
) -> Recorded:
    """The trace's figures, in one pass over it: the pool, the window, what to note."""
    origin = next(iter(trace.rows()))[0]
    count = ran = estimated = retried = 0
    tenants: set[str] = set()
    work = ran_work = 0.0
    end = ran_end = -math.inf
    first_start = math.inf
    timeline = Timeline()
    for row in trace.rows():  # as _entries reads them, without making the jobs
        arrival, _, _, _, tenant, _, _, duration, _, started, guessed, again = row
        arrival -= origin
        count += 1
        estimated += guessed
        retried += again
        tenants.add(tenant)
        work += duration
        end = max(end, arrival + duration)
        if started is None:
            timeline.add(tenant, arrival, None, 0.0)
            continue
        start = max(started - origin, arrival)
        timeline.add(tenant, arrival, start, start + duration)
        ran += 1
        ran_work += duration
        ran_end = max(ran_end, start + duration)
        first_start = min(first_start, start)
    timeline.close()
    if ran:  # fairq.sim.metrics.default_window over the recorded runs (or, none: the jobs)
        window = max(10 * ran_work / ran, ran_end / 2000, 1e-6)
    else:
        window = max(10 * work / count, end / 2000, 1e-6)
    return Recorded(
        queue=queue,
        since=since,
        until=until,
        origin=origin,
        trace=trace,
        count=count,
        pool=max(timeline.most, 1),
        window=window,
        first_start=first_start,
        settings=settings,
        own={t: o for t, o in own.items() if t in tenants},
        weights={t: weights.get(t, settings.weight) for t in tenants},
        estimated=estimated,
        cancelled=cancelled,
        notes=_notes(estimated, cancelled, retried),
    )


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
        for page in recorded.pages()
        for j, _, _ in page
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
    return recorded.count
