"""Every kind of event at once on the real server: dispatchers (ack_and_dequeue, with fails,
releases and heartbeats among the acks), producers (single and batch enqueues over several
queues and few tenants, some of higher priority) and a maintainer (maintenance with pruning,
weight changes). Each in a process of its own (threads of one process did not run together
enough to meet the cycles of waits this test found), with its own store.

No call may fail, none may have been caught in a cycle of waits (the store retries a call the
server aborted as a deadlock's victim, logging it: any such warning fails the test), every job
is handed out, and the counts and heads the store keeps per tenant are the jobs' own.
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import time
import uuid
from typing import Any

import psycopg
import pytest

from fairq.backends.postgres import PostgresBackend
from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    HeartbeatParams,
    MaintainParams,
    ReleaseParams,
    TenantSettingsParams,
)
from fairq.errors import LeaseNotFound
from fairq.job import NewJob

from ._store import open_disposable, server_url

QUEUES = ["a", "b", "c"]
DISPATCHERS = 4
PRODUCERS = 2
CALLS = 250  # enqueue calls per producer


def _job(rng: random.Random, now: float) -> NewJob:
    return NewJob(
        id=uuid.uuid4().hex, name="task", queue=rng.choice(QUEUES),
        tenant=f"t{rng.randint(0, 7)}", payload="[]", priority=rng.choice([0, 0, 1]),
        run_at=now + (1.0 if rng.random() < 0.05 else 0.0), max_attempts=5,
        lease_timeout=2.0, cost=1.0,
    )  # fmt: skip


class _Deadlocks(logging.Handler):
    """Counts the store's warnings about calls the server aborted as a deadlock's victim."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "deadlock" in record.getMessage():
            self.seen.append(record.getMessage().splitlines()[0])


def _role(role: str, k: int, schema: str, done: Any, out: Any) -> None:
    """One process: ``role`` until its work is done (producers) or ``done`` is set."""
    deadlocks = _Deadlocks()
    logging.getLogger("fairq.backends.postgres").addHandler(deadlocks)
    rng = random.Random(f"{role}{k}")
    own = PostgresBackend(server_url(), schema=schema)  # the store's clock: leases expire
    errors: list[str] = []
    enqueued: list[str] = []
    acked: list[str] = []
    try:
        if role == "producer":
            for _ in range(CALLS):
                jobs = [_job(rng, time.time()) for _ in range(1 if rng.random() < 0.7 else 8)]
                own.enqueue(EnqueueParams(jobs=jobs, now=time.time()))
                enqueued.extend(job.id for job in jobs)
        elif role == "dispatcher":
            acked = _dispatch(own, rng, k, done)
        else:
            while not done.is_set():
                # prunes what succeeded over a second ago: tenants forgotten, made again by
                # later enqueues; leases of two seconds expire
                own.maintain(MaintainParams(now=time.time(), retention=1.0))
                own.set_tenant(
                    TenantSettingsParams(
                        queue=rng.choice(QUEUES), tenant=f"t{rng.randint(0, 7)}", now=time.time(),
                        weight=float(rng.randint(1, 3)),
                    )
                )  # fmt: skip
    except Exception as exc:  # reported by the test
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        own.close()
    out.put({"errors": errors, "deadlocks": deadlocks.seen, "enqueued": enqueued, "acked": acked})


def _dispatch(own: PostgresBackend, rng: random.Random, k: int, done: Any) -> list[str]:
    """Dequeue, ack (or fail, release), heartbeat until ``done`` and nothing is left; returns
    the ids of the jobs acked."""
    tokens: list[str] = []
    acked: list[str] = []
    while True:
        now = time.time()
        params = DequeueParams(
            queues=rng.sample(QUEUES, rng.randint(1, 3)), worker_id=f"w{k}", now=now,
            limit=rng.randint(1, 10),
        )  # fmt: skip
        if tokens and rng.random() < 0.2:
            own.heartbeat(HeartbeatParams(tokens=tokens, now=now))
        kept = []
        for token in tokens:
            draw = rng.random()
            try:
                if draw < 0.05:
                    own.fail(FailParams(token=token, now=now, error="x", retry_at=now))
                elif draw < 0.08:
                    own.release(ReleaseParams(token=token, now=now))
                else:
                    kept.append(token)
            except LeaseNotFound:  # expired meanwhile, handed out again
                pass
        if kept:
            both = AckAndDequeueParams(acks=AckManyParams(tokens=kept, now=now), dequeue=params)
            result = own.ack_and_dequeue(both)
            acked += [token.rsplit(":", 1)[0] for token in result.acks.acked]
            leases = result.dequeue.leases
        else:
            leases = own.dequeue(params).leases
        tokens = [lease.token for lease in leases]
        if not tokens and done.is_set():
            return acked


@pytest.mark.processes
def test_dispatches_acks_enqueues_and_maintenance_side_by_side() -> None:
    store = open_disposable()
    context = multiprocessing.get_context("spawn")
    done = context.Event()
    out = context.Queue()
    try:
        roles = [("producer", k) for k in range(PRODUCERS)]
        roles += [("dispatcher", k) for k in range(DISPATCHERS)] + [("maintainer", 0)]
        procs = {
            (role, k): context.Process(target=_role, args=(role, k, store.schema, done, out))
            for role, k in roles
        }
        for proc in procs.values():
            proc.start()
        reports = [out.get() for _ in range(PRODUCERS)]  # producers report when done
        done.set()
        reports += [out.get() for _ in range(len(procs) - PRODUCERS)]
        for proc in procs.values():
            proc.join()
        enqueued = [job_id for report in reports for job_id in report["enqueued"]]
        acked = {job_id for report in reports for job_id in report["acked"]}
        # what the last rounds left: the inbox taken in, due jobs, everything handed out
        while True:
            params = DequeueParams(queues=QUEUES, worker_id="w", now=time.time() + 2.0, limit=100)
            due = store.maintain(MaintainParams(now=params.now)).next_due
            if not store.dequeue(params).leases and due is None:
                break
        with psycopg.connect(server_url()) as conn:
            left, kept, broken = _state(conn, store.schema, enqueued)
    finally:
        store.close()
    assert [error for report in reports for error in report["errors"]] == []
    assert [seen for report in reports for seen in report["deadlocks"]] == []
    assert len(enqueued) >= PRODUCERS * CALLS
    assert left == (0, 0)
    assert set(enqueued) - acked - kept == set()  # nothing lost
    assert broken == []


def _state(
    conn: psycopg.Connection[Any], schema: str, enqueued: list[str]
) -> tuple[tuple[int, int], set[str], list[Any]]:
    """Jobs left to hand out (inbox; ready or scheduled); the enqueued jobs still stored
    (running, dead, or succeeded and not pruned yet); tenants whose counts or head are not
    their jobs'."""
    row = conn.execute(
        f"""SELECT (SELECT count(*) FROM "{schema}".inbox),
                   (SELECT count(*) FROM "{schema}".jobs WHERE state IN ('ready', 'scheduled'))"""
    ).fetchone()
    assert row is not None
    kept = conn.execute(
        f"""SELECT id FROM "{schema}".jobs WHERE id = ANY(%(ids)s)
            UNION ALL SELECT id FROM "{schema}".succeeded_jobs WHERE id = ANY(%(ids)s)""",
        {"ids": enqueued},
    ).fetchall()
    broken = conn.execute(
        f"""SELECT t.queue, t.tenant FROM "{schema}".tenants t
            WHERE t.ready <> (SELECT count(*) FROM "{schema}".jobs j
                              WHERE j.tenant_id = t.id AND j.state = 'ready')
               OR t.running <> (SELECT count(*) FROM "{schema}".jobs j
                                WHERE j.tenant_id = t.id AND j.state = 'running')
               OR t.head_seq IS DISTINCT FROM (
                      SELECT j.seq FROM "{schema}".jobs j
                      WHERE j.tenant_id = t.id AND j.state = 'ready'
                      ORDER BY j.priority DESC, j.seq LIMIT 1)"""
    ).fetchall()
    return (row[0], row[1]), {job_id for (job_id,) in kept}, broken
