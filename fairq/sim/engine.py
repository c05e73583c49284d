"""A discrete-event simulator on a virtual clock: W workers, jobs arriving, one strategy.

Events (arrivals, finishes, a strategy's own wake-ups) come off one heap in time order; an
instant's arrivals reach the strategy as one batch, and after the events of each instant the
strategy is asked once for jobs for all the idle workers. Nothing reads the
wall clock, and the only randomness is the ``random.Random`` the run hands to the strategy, so
the same seed gives the same run.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

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


@dataclass(frozen=True, slots=True)
class Record:
    """One job's run: when it arrived, started and finished, and on which worker."""

    job: SimJob
    start: float
    finish: float
    worker: int

    @property
    def wait(self) -> float:
        return self.start - self.job.arrival


class Strategy(Protocol):
    """How a queueing approach hands jobs to workers. Each call carries the virtual ``now``."""

    name: str

    def start(self, workers: int, rng: random.Random) -> None:
        """Called once before the first event: the pool size and the run's randomness."""

    def submit(self, jobs: Sequence[SimJob], now: float) -> None:
        """Producers enqueue ``jobs`` (all arriving at ``now``, in arrival order)."""

    def take(self, idle: Sequence[int], now: float) -> Sequence[SimJob | None]:
        """The jobs the ``idle`` workers (ascending ids) run now, position by position: the
        same as asking each worker in turn. None, or a list shorter than ``idle``, leaves
        those workers idle until the next event."""

    def finished(self, job: SimJob, worker: int, now: float) -> None:
        """``worker`` finished ``job``."""

    def wake_at(self, now: float) -> float | None:
        """The next time the strategy can have work with no arrival or finish (a retry
        coming due, a planner's round); None when it has no such time."""


Progress = Callable[[int], None]  # called with the number of jobs finished so far


def simulate(
    jobs: Sequence[SimJob],
    strategy: Strategy,
    *,
    workers: int,
    seed: int,
    progress: Progress | None = None,
    progress_every: int = 10_000,
) -> list[Record]:
    """Run ``jobs`` (in arrival order) through ``strategy`` on ``workers`` workers.

    Returns one record per job, in finishing order. A strategy that never hands out some job
    (it holds work forever) raises RuntimeError rather than reporting a partial run.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    strategy.start(workers, random.Random(seed))
    arrivals = _instants(jobs)  # read in order: the heap holds only finishes and wake-ups
    events: list[tuple[float, int, int, object]] = []
    seq = 0
    idle = list(range(workers))  # kept in ascending order
    running: dict[int, tuple[SimJob, float]] = {}
    records: list[Record] = []
    woken: set[float] = set()
    pop, push = heapq.heappop, heapq.heappush
    next_arrival = 0
    while events or next_arrival < len(arrivals):
        if next_arrival < len(arrivals) and (
            not events or arrivals[next_arrival][0] <= events[0][0]
        ):
            now, batch = arrivals[next_arrival]
            next_arrival += 1
            strategy.submit(batch, now)
        else:
            now = events[0][0]
        freed = False
        while events and events[0][0] == now:
            _, kind, _, payload = pop(events)
            if kind == _FINISH:
                assert isinstance(payload, int)
                job, started = running.pop(payload)
                strategy.finished(job, payload, now)
                records.append(Record(job, started, now, payload))
                idle.append(payload)
                freed = True
                if progress is not None and len(records) % progress_every == 0:
                    progress(len(records))
            else:
                woken.discard(now)
        if idle:
            if freed:
                idle.sort()
            handed = strategy.take(idle, now)
            if handed:
                still_idle = idle[len(handed) :]
                for worker, given in zip(idle, handed, strict=False):
                    if given is None:
                        still_idle.append(worker)
                    else:
                        running[worker] = (given, now)
                        push(events, (now + given.duration, _FINISH, seq, worker))
                        seq += 1
                idle = sorted(still_idle) if len(still_idle) < len(idle) else idle
        wake = strategy.wake_at(now)
        if wake is not None and wake > now and wake not in woken:
            woken.add(wake)
            push(events, (wake, _WAKE, seq, None))
            seq += 1
    if len(records) != len(jobs):
        raise RuntimeError(
            f"{strategy.name} ran {len(records)} of {len(jobs)} jobs: it held the rest forever"
        )
    if progress is not None:
        progress(len(records))
    return records


def _instants(jobs: Sequence[SimJob]) -> list[tuple[float, list[SimJob]]]:
    """The jobs grouped by arrival time, in arrival order (ties in the order given)."""
    grouped: list[tuple[float, list[SimJob]]] = []
    for job in sorted(jobs, key=attrgetter("arrival")):  # stable: ties keep their order
        if grouped and grouped[-1][0] == job.arrival:
            grouped[-1][1].append(job)
        else:
            grouped.append((job.arrival, [job]))
    return grouped


def one_pool(
    next_job: Callable[[float], SimJob | None], idle: Sequence[int], now: float
) -> list[SimJob]:
    """``take`` for a strategy with one pool, where every worker would get the same answer:
    jobs until the first None (every later worker at this instant would get None too)."""
    handed: list[SimJob] = []
    for _ in idle:
        job = next_job(now)
        if job is None:
            break
        handed.append(job)
    return handed
