"""A discrete-event simulator on a virtual clock: W workers, jobs arriving, one strategy.

Events (arrivals, finishes, a strategy's own wake-ups) come off one heap in time order; an
instant's arrivals reach the strategy as one batch, and after the events of each instant the
strategy is asked once for jobs for all the idle workers. Nothing reads the
wall clock, and the only randomness is the ``random.Random`` the run hands to the strategy, so
the same seed gives the same run.

A strategy may run a job in parts (``Part``: interruptible iteration, where a long job hands its
worker back every slice and resumes later); the engine keeps what each job has left and records
every part. An ``Outage`` takes workers out for a while (a hung pool): they take no job then.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol, TypeVar

_FINISH = 1  # an instant's arrivals are submitted before its finishes free workers
_WAKE = 2


@dataclass(frozen=True, slots=True)
class SimJob:
    """One job of a workload. ``cost`` is the estimate a producer declares (fairq charges it
    at dispatch and corrects it to the real run time at ack); ``duration`` is the real time."""

    id: int
    arrival: float
    tenant: str
    duration: float
    cost: float
    name: str = "sim"  # the job's type: fairq learns run times per (queue, name)
    priority: int = 0  # within its tenant, higher first (strategies without priorities ignore it)


@dataclass(frozen=True, slots=True)
class Part:
    """Run ``job`` for at most ``seconds`` now, then hand the worker back (the engine keeps
    what is left of it; the part that covers the rest ends the job)."""

    job: SimJob
    seconds: float


@dataclass(frozen=True, slots=True)
class Outage:
    """``workers`` take no job from ``start`` to ``end`` (a hung or stopped pool); what they
    run when it starts runs to its end."""

    workers: frozenset[int]
    start: float
    end: float

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end or not self.workers or min(self.workers) < 0:
            raise ValueError(f"an outage needs workers and 0 <= start < end, got {self}")

    def holds(self, worker: int, now: float) -> bool:
        return self.start <= now < self.end and worker in self.workers


@dataclass(frozen=True, slots=True)
class Record:
    """One job's run: when it arrived, first started and finished, and on which worker it
    ended. ``parts`` are the (start, end) of each run of a job that ran in parts."""

    job: SimJob
    start: float
    finish: float
    worker: int
    parts: tuple[tuple[float, float], ...] = ()

    @property
    def wait(self) -> float:
        return self.start - self.job.arrival

    def runs(self) -> tuple[tuple[float, float], ...]:
        """The spans the job held a worker: its parts, or its one run."""
        return self.parts or ((self.start, self.finish),)


class Strategy(Protocol):
    """How a queueing approach hands jobs to workers. Each call carries the virtual ``now``."""

    name: str

    def start(self, workers: int, rng: random.Random) -> None:
        """Called once before the first event: the pool size and the run's randomness."""

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        """Producers enqueue ``jobs`` (all arriving at ``now``, in arrival order)."""

    def take(self, idle: Sequence[int], now: float) -> Sequence[SimJob | Part | None]:
        """The jobs the ``idle`` workers (ascending ids) run now, position by position: the
        same as asking each worker in turn. None, or a list shorter than ``idle``, leaves
        those workers idle until the next event. A ``Part`` runs a job for a while only."""

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        """``worker`` finished its run of ``job`` (the whole job, or the ``Part`` it was
        handed: a strategy that hands out parts keeps what each job has left, as the engine
        does, ``left - min(seconds, left)``)."""

    def wake_at(self, now: float) -> float | None:
        """The next time the strategy can have work with no arrival or finish (a retry
        coming due, a planner's round); None when it has no such time."""


_Run = TypeVar("_Run", bound="SimJob | Part")
Progress = Callable[[int], None]  # called with the number of jobs finished so far
Sink = Callable[[Record], None]  # takes each record as its job finishes


class Waiting(Protocol):
    """Told, in time order, each change of a tenant's jobs waiting (arrived, or handed back
    between two parts, and not running): +1 when one becomes ready, -1 when one starts. At
    one instant the +1s come first."""

    def __call__(self, tenant: str, change: int, now: float) -> None: ...


class Simulation:
    """One run fed incrementally: ``feed`` jobs in arrival order, page by page, then ``close``.
    Each record goes to ``sink`` as its job finishes, so a run holds only the jobs waiting or
    running (and the strategy's state), never the whole trace: fed page by page or all at
    once, the run is the same."""

    def __init__(
        self,
        strategy: Strategy,
        *,
        workers: int,
        seed: int,
        sink: Sink,
        outages: Sequence[Outage] = (),
        waiting: Waiting | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        for outage in outages:
            if max(outage.workers) >= workers:
                raise ValueError(f"an outage names worker {max(outage.workers)} of {workers}")
        strategy.start(workers, random.Random(seed))
        self.strategy = strategy
        self.sink = sink
        self.outages = outages
        self.waiting = waiting
        self.fed = self.finished = 0
        self._events: list[tuple[float, int, int, object]] = []
        self._seq = 0
        for outage in outages:  # the instant a pool comes back, its idle workers are offered
            self._events.append((outage.end, _WAKE, self._seq, None))
            self._seq += 1
        heapq.heapify(self._events)
        self._idle = list(range(workers))  # kept in ascending order
        self._running: dict[int, tuple[SimJob, float, bool]] = {}  # worker -> job, start, last
        self._left: dict[int, float] = {}  # job id -> seconds left, for jobs run in parts
        self._spans: dict[int, list[tuple[float, float]]] = {}  # job id -> its parts so far
        self._woken: set[float] = set()
        self._instant: list[SimJob] = []  # the latest instant's arrivals, not yet submitted
        self._at = -math.inf

    def feed(self, jobs: Iterable[SimJob]) -> None:
        """More arrivals, in arrival order, none before the last fed. An instant's arrivals
        reach the strategy as one batch: the last instant waits for the next feed (or close)."""
        for job in jobs:
            if job.arrival != self._at:
                if job.arrival < self._at:
                    raise ValueError(
                        f"job {job.id} arrives at {job.arrival}, before {self._at}: feed jobs "
                        "in arrival order"
                    )
                self._submit()
                self._at = job.arrival
            self._instant.append(job)
            self.fed += 1

    def close(self) -> int:
        """Run to the end; the jobs run. RuntimeError when the strategy held some forever."""
        self._submit()
        while self._events:
            self._step(None)
        if self.finished != self.fed:
            where = getattr(self.strategy, "held", None)  # a strategy that can say where
            raise RuntimeError(
                f"{self.strategy.name} ran {self.finished} of {self.fed} jobs: it held the "
                f"rest forever{f' ({where()})' if callable(where) else ''}"
            )
        return self.finished

    def _submit(self) -> None:
        if not self._instant:
            return
        batch, self._instant = self._instant, []
        at = batch[0].arrival
        events = self._events
        while events and events[0][0] < at:
            self._step(None)
        self._step(batch)

    def _step(self, batch: list[SimJob] | None) -> None:
        """One instant: its arrivals (``batch``) or the next event's time, every event of
        that instant, then the idle workers offered."""
        events, strategy, waiting = self._events, self.strategy, self.waiting
        if batch is not None:
            now = batch[0].arrival
            strategy.submit(batch, now)
            if waiting is not None:
                for job in batch:
                    waiting(job.tenant, 1, now)
        else:
            now = events[0][0]
        freed = False
        pop = heapq.heappop
        idle, running, spans = self._idle, self._running, self._spans
        while events and events[0][0] == now:
            _, kind, _, payload = pop(events)
            if kind == _FINISH:
                assert isinstance(payload, int)
                job, started, last = running.pop(payload)
                strategy.finished(job, payload, now)
                idle.append(payload)
                freed = True
                if job.id in spans:
                    spans[job.id].append((started, now))
                    if not last:
                        if waiting is not None:
                            waiting(job.tenant, 1, now)  # ready again for its next part
                        continue
                    parts = tuple(spans.pop(job.id))
                    del self._left[job.id]
                    record = Record(job, parts[0][0], now, payload, parts)
                else:
                    record = Record(job, started, now, payload)
                self.finished += 1
                self.sink(record)
            else:
                self._woken.discard(now)
        if idle:
            if freed:
                idle.sort()
            outages = self.outages
            offered = [w for w in idle if not _out(outages, w, now)] if outages else idle
            handed = strategy.take(offered, now) if offered else ()
            if handed:
                self._hand(offered, handed, now)
        wake = strategy.wake_at(now)
        if wake is not None and wake > now and wake not in self._woken:
            self._woken.add(wake)
            heapq.heappush(events, (wake, _WAKE, self._seq, None))
            self._seq += 1

    def _hand(
        self, offered: Sequence[int], handed: Sequence[SimJob | Part | None], now: float
    ) -> None:
        busy: set[int] = set()
        left, spans, waiting = self._left, self._spans, self.waiting
        for worker, given in zip(offered, handed, strict=False):
            if given is None:
                continue
            if isinstance(given, Part):
                job = given.job
                remaining = left.get(job.id, job.duration)
                run, last = min(given.seconds, remaining), given.seconds >= remaining
                if not (last and job.id not in spans):  # a whole run needs no parts
                    spans.setdefault(job.id, [])
                    left[job.id] = remaining - run
            else:
                job, run, last = given, given.duration, True
            if waiting is not None:
                waiting(job.tenant, -1, now)
            self._running[worker] = (job, now, last)
            heapq.heappush(self._events, (now + run, _FINISH, self._seq, worker))
            self._seq += 1
            busy.add(worker)
        if busy:
            self._idle = [w for w in self._idle if w not in busy]


def simulate(
    jobs: Sequence[SimJob],
    strategy: Strategy,
    *,
    workers: int,
    seed: int,
    outages: Sequence[Outage] = (),
    progress: Progress | None = None,
    progress_every: int = 10_000,
) -> list[Record]:
    """Run ``jobs`` (in any order: ties keep theirs) through ``strategy`` on ``workers``
    workers, all at once (``Simulation`` takes them page by page).

    Returns one record per job, in finishing order. A strategy that never hands out some job
    (it holds work forever) raises RuntimeError rather than reporting a partial run.
    """
    records: list[Record] = []

    def keep(record: Record) -> None:
        records.append(record)
        if progress is not None and len(records) % progress_every == 0:
            progress(len(records))

    run = Simulation(strategy, workers=workers, seed=seed, sink=keep, outages=outages)
    run.feed(sorted(jobs, key=attrgetter("arrival")))  # stable: ties keep their order
    run.close()
    if progress is not None:
        progress(len(records))
    return records


def _out(outages: Sequence[Outage], worker: int, now: float) -> bool:
    return any(outage.holds(worker, now) for outage in outages)


def one_pool(
    next_job: Callable[[float], _Run | None], idle: Sequence[int], now: float
) -> list[_Run]:
    """``take`` for a strategy with one pool, where every worker would get the same answer:
    jobs until the first None (every later worker at this instant would get None too)."""
    handed: list[_Run] = []
    for _ in idle:
        job = next_job(now)
        if job is None:
            break
        handed.append(job)
    return handed
