"""Cancels on SQLite (fairq/cancel.py): one write transaction for the whole call.

A waiting job leaves its tenant's FIFO (its row changes state, so it leaves the partial index
``jobs_ready`` or ``jobs_scheduled``); the tenant's head is read again and its eligibility
refreshed, as after a dispatch. A running job is only marked: its heartbeat reports it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from fairq.backends.sqlite.events import end_cancelled, update_head
from fairq.backends.sqlite.records import JobRow, QueueRow, TenantRow
from fairq.backends.sqlite.sql import Q
from fairq.cancel import CANCELLED_NOTE, CancelOutcome, outcome_for
from fairq.job import JobState
from fairq.policy.tenant import refresh


def cancel(db: sqlite3.Connection, ids: Sequence[str], now: float) -> list[CancelOutcome]:
    return [_cancel_one(db, job_id, now) for job_id in ids]


def _cancel_one(db: sqlite3.Connection, job_id: str, now: float) -> CancelOutcome:
    job = JobRow.by_id(db, job_id)
    if job is None:
        return CancelOutcome.UNKNOWN
    outcome = outcome_for(job.state)
    if outcome is CancelOutcome.REQUESTED:
        db.execute(Q["job_request_cancel"], {"seq": job.seq})
    if outcome is not CancelOutcome.CANCELLED:
        return outcome
    tenant = TenantRow.load(db, job.tenant_id)
    was_ready = job.state is JobState.READY
    if was_ready:
        tenant.ready -= 1
    else:
        tenant.scheduled -= 1
    job.last_error = CANCELLED_NOTE
    end_cancelled(db, job, tenant, now)
    if was_ready:
        update_head(db, tenant)
        refresh(QueueRow.get(db, job.queue), tenant, now)
    tenant.save(db)
    return CancelOutcome.CANCELLED
