"""Learned job costs on SQLite (fairq/policy/cost.py): one ``job_costs`` row per (queue, name).

The rule is the policy's own functions called from Python inside the event's transaction, so
the doubles are bit-identical to the reference model's. A call reads each (queue, name) it
needs once (``Costs`` remembers it for the rest of the call) and writes each sample at once,
so a dispatch later in the same call (ack and dequeue) charges what the acks just taught.
"""

from __future__ import annotations

import sqlite3

from fairq.backends.sqlite.records import JobRow
from fairq.backends.sqlite.sql import Q
from fairq.contract import JobCost, JobCostsParams
from fairq.policy import cost, fairness


class Costs:
    """The learned costs one write transaction reads and teaches."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._known: dict[tuple[str, str], tuple[int, float]] = {}

    def _get(self, queue: str, name: str) -> tuple[int, float]:
        key = (queue, name)
        found = self._known.get(key)
        if found is None:
            row = self._db.execute(Q["job_cost_get"], {"queue": queue, "name": name}).fetchone()
            found = (0, 0.0) if row is None else (int(row["runs"]), float(row["mean"]))
            self._known[key] = found
        return found

    def estimate(self, job: JobRow) -> float:
        """What the job is charged when handed out (a job that does not learn reads nothing)."""
        if not job.learn_cost:
            return job.cost
        runs, mean = self._get(job.queue, job.name)
        return cost.estimate(job.cost, job.learn_cost, runs, mean)

    def learn(self, job: JobRow, ended_at: float) -> None:
        """A claimed run ended at ``ended_at`` with its time known (an ack or a reported
        failure): its charge is a sample of its (queue, name). An unclaimed one teaches
        nothing: its time was spent waiting in a broker."""
        if not job.claimed:
            return
        assert job.started_at is not None
        runs, mean = self._get(job.queue, job.name)
        runs, mean = cost.learn(runs, mean, fairness.run_charge(job.started_at, ended_at))
        self._known[job.queue, job.name] = (runs, mean)
        args = {"queue": job.queue, "name": job.name, "runs": runs, "mean": mean}
        self._db.execute(Q["job_cost_put"], args)


def read(db: sqlite3.Connection, params: JobCostsParams) -> list[JobCost]:
    rows = db.execute(Q["job_costs_read"], {"queue": params.queue})
    return [
        JobCost(queue=r["queue"], name=r["name"], runs=r["runs"], estimate=r["mean"]) for r in rows
    ]
