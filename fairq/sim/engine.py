"""A discrete-event simulator on a virtual clock: W workers, jobs arriving, one strategy.

Events (arrivals, finishes, a strategy's own wake-ups) come off one heap in time order; after
the events of each instant, every idle worker asks the strategy for a job. Nothing reads the
wall clock, and the only randomness is the ``random.Random`` the run hands to the strategy, so
the same seed gives the same run.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

_ARRIVE = 0  # an instant's arrivals are seen before its finishes free workers
_FINISH = 1
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

    def submit(self, job: SimJob, now: float) -> None:
        """A producer enqueues ``job``."""

    def next_job(self, worker: int, now: float) -> SimJob | None:
        """The job idle ``worker`` runs now, or None (it waits for the next event)."""

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
    events: list[tuple[float, int, int, object]] = []
    seq = 0
    for job in jobs:
        events.append((job.arrival, _ARRIVE, seq, job))
        seq += 1
    heapq.heapify(events)
    idle = list(range(workers))
    running: dict[int, tuple[SimJob, float]] = {}
    records: list[Record] = []
    woken: set[float] = set()
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, kind, _, payload = heapq.heappop(events)
            if kind == _ARRIVE:
                assert isinstance(payload, SimJob)
                strategy.submit(payload, now)
            elif kind == _FINISH:
                assert isinstance(payload, int)
                job, started = running.pop(payload)
                strategy.finished(job, payload, now)
                records.append(Record(job=job, start=started, finish=now, worker=payload))
                idle.append(payload)
                if progress is not None and len(records) % progress_every == 0:
                    progress(len(records))
            else:
                woken.discard(now)
        still_idle: list[int] = []
        for worker in sorted(idle):
            handed = strategy.next_job(worker, now)
            if handed is None:
                still_idle.append(worker)
                continue
            running[worker] = (handed, now)
            heapq.heappush(events, (now + handed.duration, _FINISH, seq, worker))
            seq += 1
        idle = still_idle
        wake = strategy.wake_at(now)
        if wake is not None and wake > now and wake not in woken:
            woken.add(wake)
            heapq.heappush(events, (wake, _WAKE, seq, None))
            seq += 1
    if len(records) != len(jobs):
        raise RuntimeError(
            f"{strategy.name} ran {len(records)} of {len(jobs)} jobs: it held the rest forever"
        )
    if progress is not None:
        progress(len(records))
    return records
