"""The heartbeat warns of a lost lease only for a job still running, never for one whose outcome
was stored while the beat was under way (its timing and wake-ups: test_keeper.py)."""

from __future__ import annotations

import logging
import time

import pytest

from fairq.contract import AckManyParams, DequeueParams, EnqueueParams
from fairq.model import ReferenceModel
from fairq.worker.heartbeat import Heartbeat
from fairq.worker.running import RunningJobs

from .helpers import new_job, wait_for


def test_a_job_acked_between_look_and_beat_is_not_reported_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = ReferenceModel()
    store.enqueue(EnqueueParams(jobs=[new_job("j1"), new_job("j2")], now=time.time()))
    finished, taken_away = store.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=time.time(), limit=2)
    ).leases
    running = RunningJobs(2)
    running.add(finished)
    running.add(taken_away)
    running.claim(finished.token)  # it succeeded; its ack is stored below, its slot not yet freed
    for lease in (finished, taken_away):  # both leases are gone from the store
        store.ack_many(AckManyParams(tokens=[lease.token], now=time.time()))
    beat = Heartbeat(store, running, clock=time.time, interval=0.01)
    with caplog.at_level(logging.WARNING, logger="fairq.worker"):
        beat.start()
        try:
            wait_for(lambda: _warned(caplog, taken_away.job_id), "the running job's warning")
        finally:
            beat.stop()
    assert not _warned(caplog, finished.job_id)


def _warned(caplog: pytest.LogCaptureFixture, job_id: str) -> bool:
    return any(
        "lost its lease" in r.getMessage() and job_id in r.getMessage() for r in caplog.records
    )
